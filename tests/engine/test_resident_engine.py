"""A resident mode on the real vLLM CPU engine: the CPU build refuses `--enable-sleep-mode` (vLLM's
`ModelConfig`: "Sleep mode is not supported on current platform."), and specdash says so and restarts the
mode as a plain server: never a hang, never a server left half up. Marked `engine` (`make test-engine`)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from specdash import config
from specdash.config import HostConfig
from specdash.core.events import Notice
from specdash.engines.registry import names, resident_refusal
from specdash.phases import Phase
from specdash.remote.ssh import SSHHost, SSHOptions
from specdash.server.remote_session import RemoteSession, running
from tests.engine.conftest import ENGINE_PYTHON
from tests.engine.test_vllm_engine import Recorder, modes_toml
from tests.integration.conftest import target
from tests.support.ports import free_port
from tests.support.sshd import Keys, Sshd

pytestmark = pytest.mark.engine


async def test_the_cpu_build_refuses_sleep_mode_and_the_mode_restarts_as_a_plain_server(
    engine_ready: Path, sshd: Sshd, ssh_keys: Keys, tmp_path: Path
) -> None:
    text = modes_toml(free_port()) + f'\n[modes.resident]\nextends = "plain"\nport = {free_port()}\nresident = true\n'
    path = tmp_path / "config.toml"
    path.write_text(text)
    cfg = config.load(path, engines=names(), residency=resident_refusal)
    known = tmp_path / "known_hosts"
    known.write_text(sshd.known_hosts_line() + "\n")
    (tmp_path / "ssh_config").write_text("")
    options = SSHOptions(
        identity_files=(ssh_keys.client_key,),
        known_hosts=known,
        ssh_config=tmp_path / "ssh_config",
        use_agent=False,
        connect_timeout=5.0,
    )
    host = HostConfig(
        name="workstation",
        address=target(sshd),
        python=str(ENGINE_PYTHON),
        state_dir=f"~/.specdash-tests/{uuid.uuid4().hex}",
    )
    seen = Recorder()
    session = RemoteSession(SSHHost(target(sshd), options), host, cfg)
    async with running(session, seen):
        try:
            await session.switch("resident")
            # The first launch crashes on the flag; the second, without it, becomes ready.
            final = await session.wait_status((Phase.READY,), timeout=600)
            assert final.mode == "resident"
            notices = [e.text for e in seen.events if isinstance(e, Notice)]
            refused = [n for n in notices if "refuses sleep mode on workstation" in n]
            assert refused and "Sleep mode is not supported" in refused[0], notices
            assert "restarting it as a plain server (not resident)" in refused[0]
            record = await session.lifecycle.current()
            assert record is not None and record.command and "--enable-sleep-mode" not in record.command
            modes = {m.name: m.resident for m in session._modes_event().modes}
            assert modes["resident"] == ""  # no longer shown as resident in this session
        finally:
            record = await session.lifecycle.current()
            if record is not None and record.alive:
                await session.lifecycle.stop(record, grace=10)
