"""`connect` to a host that refuses or rejects our key: an error that stays on screen until the user acts
(retry or quit), the header says it failed (not "connecting…" for ever), and quitting exits non-zero.

Real parts: the sshd fixture (a stopped server's port refuses; the running one rejects a key it does not
know), the SSH client path and the dashboard as `connect` builds it. Pilot tests at the three sizes.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from specdash.config import Config, HostConfig
from specdash.remote.ssh import SSHHost, SSHOptions
from specdash.server.remote_session import RemoteSession
from specdash.ui.app import make_app
from specdash.ui.screens.confirm import ConfirmScreen
from tests.integration.conftest import target
from tests.support.eventually import eventually
from tests.support.ports import free_port
from tests.support.sshd import TEST_USER, Keys, Sshd

SIZES = [(80, 24), (100, 30), (160, 45)]


def _session(address: str, options: SSHOptions) -> RemoteSession:
    host_config = HostConfig(name="gpu", address=address, state_dir=f"~/.specdash-tests/{uuid.uuid4().hex}")
    return RemoteSession(SSHHost(address, options), host_config, Config(path=None, hosts={}, modes={}))


async def _fails_on_screen_and_exits_1(session: RemoteSession, size: tuple[int, int], reason: str) -> None:
    app = make_app(session)
    async with app.run_test(size=size) as pilot:
        await eventually(lambda: isinstance(app.screen, ConfirmScreen), until=bool, timeout=30, what="the error")
        await pilot.pause()
        question = str(app.screen.query_one("#question").render())
        assert question.startswith(f"Cannot connect to {session.label}:"), question
        assert reason in question, question
        # The header hears of it through its own message, not necessarily before the dialog opens.
        await eventually(
            lambda: str(app.dashboard.query_one("#connection").render()),
            until=lambda header: header.startswith("✖ failed"),
            timeout=10,
            what="the header saying the connection failed",
        )
        assert app.connection_error is not None and reason in app.connection_error
        await pilot.press("n")  # Quit
        await eventually(lambda: app.return_code, until=lambda rc: rc is not None, timeout=10, what="the exit")
    assert app.return_code == 1


@pytest.mark.parametrize("size", SIZES)
async def test_a_host_that_refuses_is_an_error_on_screen_and_a_non_zero_exit(
    ssh_options: SSHOptions, size: tuple[int, int]
) -> None:
    session = _session(f"{TEST_USER}@127.0.0.1:{free_port()}", ssh_options)
    await _fails_on_screen_and_exits_1(session, size, "Connection refused")


@pytest.mark.parametrize("size", SIZES)
async def test_a_host_that_rejects_the_key_is_an_error_on_screen_and_a_non_zero_exit(
    sshd: Sshd, ssh_options: SSHOptions, ssh_keys: Keys, size: tuple[int, int]
) -> None:
    session = _session(target(sshd), replace(ssh_options, identity_files=(ssh_keys.other_key,)))
    await _fails_on_screen_and_exits_1(session, size, str(ssh_keys.other_key))


async def test_retry_after_a_refusal_connects_once_the_host_answers(
    make_sshd: Callable[..., Sshd], ssh_options: SSHOptions, tmp_path: Path
) -> None:
    server = make_sshd("refuse-then-answer")
    known = tmp_path / "known_hosts_retry"
    known.write_text(server.known_hosts_line() + "\n")
    server.stop()
    session = _session(target(server), replace(ssh_options, known_hosts=known))
    app = make_app(session)
    async with app.run_test(size=(100, 30)) as pilot:
        await eventually(lambda: isinstance(app.screen, ConfirmScreen), until=bool, timeout=30, what="the error")
        server.start()
        await pilot.press("y")  # Retry
        await eventually(
            lambda: str(app.dashboard.query_one("#connection").render()),
            until=lambda text: text == "● connected",
            timeout=30,
            what="the header after the retry",
        )
        assert app.connection_error is None
        await pilot.press("q")
        await eventually(lambda: app.return_code, until=lambda rc: rc is not None, timeout=10, what="the exit")
    assert app.return_code == 0
