"""Who ended a run decides how it ended, and only a start watched from launch teaches the ETA.

A stand-in engine (`fake_engine.py`) behaves as real ones were seen to: a traceback while a SIGTERM
tears it down, a clean-looking exit with status 0 that nobody asked for, a child left in its group.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from specdash import config
from specdash.bench.store import Store
from specdash.config import Config, HostConfig
from specdash.core.events import Notice
from specdash.engines.registry import names
from specdash.phases import SETTLED, Origin, Phase
from specdash.remote.ssh import SSHHost, SSHOptions
from specdash.server.lifecycle import Lifecycle
from specdash.server.remote_session import RemoteSession, running
from tests.integration.conftest import remote_alive, target
from tests.support.ports import free_port
from tests.support.recorder import Recorder
from tests.support.remote_sim import remote_python
from tests.support.sshd import Sshd

ENGINE = Path(__file__).parents[1] / "support" / "fake_engine.py"


def engine_config(tmp: Path, behaviours: list[str]) -> Config:
    args = [arg for b in behaviours for arg in ("--behaviour", b)]
    text = f"""
[modes.fake]
engine = "sglang"
model = "/models/none"
port = {free_port()}
launcher = {[remote_python(), str(ENGINE)]!r}
args = {args!r}
stop_timeout = 5
"""
    path = tmp / "config.toml"
    path.write_text(text.replace("'", '"'))
    return config.load(path, engines=names())


@pytest.fixture
async def host_cfg(sshd: Sshd, ssh_options: SSHOptions) -> AsyncIterator[HostConfig]:
    """A state dir of the test's own; afterwards whatever still runs there is stopped and the dir removed."""
    hc = HostConfig(name="fake-host", address=target(sshd), state_dir=f"~/.specdash-tests/{uuid.uuid4().hex}")
    yield hc
    async with SSHHost(target(sshd), ssh_options) as h:
        lifecycle = Lifecycle(h, hc)
        record = await lifecycle.current()
        if record is not None and record.alive:
            await lifecycle.stop(record, grace=5)
        await h.run(f"rm -rf {hc.state_dir}")


def session_for(
    sshd: Sshd, options: SSHOptions, host_cfg: HostConfig, cfg: Config, store: Store | None = None
) -> RemoteSession:
    return RemoteSession(SSHHost(target(sshd), options), host_cfg, cfg, store=store)


async def test_a_stop_we_asked_for_is_stopped_even_when_the_engine_prints_a_traceback(
    sshd: Sshd, ssh_options: SSHOptions, host_cfg: HostConfig, tmp_path: Path
) -> None:
    cfg = engine_config(tmp_path, ["traceback-on-term"])
    seen = Recorder()
    async with running(session_for(sshd, ssh_options, host_cfg, cfg), seen) as session:
        await session.start("fake")
        assert (await session.wait_status(SETTLED, timeout=60)).phase is Phase.READY
        await session.stop()
        assert session.status.phase is Phase.STOPPED and session.status.crash is None
        assert any("EngineDeadError" in line for line in seen.log_lines())  # the traceback was there ...
        crashes = [e for e in seen.of(Notice) if e.severity == "error"]  # type: ignore[attr-defined]
        assert crashes == []  # ... and is no crash
        phases = seen.phases()
        assert Phase.CRASHED not in phases[phases.index(Phase.READY) :]


async def test_an_exit_nobody_asked_for_is_a_crash_whatever_its_code(
    sshd: Sshd, ssh_options: SSHOptions, host_cfg: HostConfig, tmp_path: Path
) -> None:
    cfg = engine_config(tmp_path, ["exit-0-after"])
    async with running(session_for(sshd, ssh_options, host_cfg, cfg)) as session:
        await session.start("fake")
        assert (await session.wait_status(SETTLED, timeout=60)).phase is Phase.READY
        final = await session.wait_status((Phase.CRASHED, Phase.STOPPED, Phase.EXITED), timeout=60)
        assert final.phase is Phase.CRASHED, final
        assert final.crash is not None


async def test_what_a_crash_leaves_in_the_group_is_shown_then_cleaned_up(
    sshd: Sshd, ssh_options: SSHOptions, host_cfg: HostConfig, tmp_path: Path
) -> None:
    cfg = engine_config(tmp_path, ["crash-after", "leave-child"])
    async with running(session_for(sshd, ssh_options, host_cfg, cfg)) as session:
        await session.start("fake")
        assert (await session.wait_status(SETTLED, timeout=60)).phase is Phase.READY
        crashed = await session.wait_status((Phase.CRASHED,), timeout=60)
        assert crashed.crash is not None and "RuntimeError: worker died" in crashed.crash.reason
        await session.watch_finished(timeout=30)
        left = session.status.leftovers
        assert len(left) == 1 and left[0].endswith("sleep 300"), left
        child = int(left[0].split()[0])
        assert await remote_alive(session.host, child)

        await session.stop()  # the cleanup (the dashboard asks first: `stop_question` lists them)
        assert session.status.phase is Phase.CRASHED and session.status.leftovers == ()
        assert "cleaned up 1 process" in session.status.note
        assert not await remote_alive(session.host, child)


async def test_an_attach_is_recorded_as_an_attach_and_the_eta_does_not_learn_from_it(
    sshd: Sshd, ssh_options: SSHOptions, host_cfg: HostConfig, tmp_path: Path
) -> None:
    cfg = engine_config(tmp_path, [])
    store = Store(tmp_path / "store.db")
    async with running(session_for(sshd, ssh_options, host_cfg, cfg, store)) as first:
        await first.start("fake")
        assert (await first.wait_status(SETTLED, timeout=60)).phase is Phase.READY
    assert [r.kind for r in store.startups(host="fake-host")] == ["startup"]
    async with running(session_for(sshd, ssh_options, host_cfg, cfg, store)) as second:
        status = await second.wait_status((Phase.READY,), timeout=60)
        assert status.origin is Origin.ATTACHED
        assert [r.kind for r in store.startups(host="fake-host")] == ["attach", "startup"]
        assert store.startups(host="fake-host")[0].phases == {}
        assert len(second._history("fake")) == 1  # only the watched launch
        await second.stop()
