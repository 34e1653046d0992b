"""Which watch speaks for the session (`RemoteSession._watch_run`): only the current run's.

A crashed run's watch goes on reading its exit after the status said CRASHED; a start right after (a tune's
next setting, `s` in the dashboard) must not have its status overwritten by that watch's late publish. ci20
recorded the tune demo's second setting as crashed "at C=None" with the first setting's RuntimeError this
way. The session is never connected: the watches' tasks wait for a link that never comes, and the handover
itself is what is tested.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from specdash.config import HostConfig, parse
from specdash.core.events import ServerStatus
from specdash.engines.registry import names
from specdash.phases import CrashInfo, Phase
from specdash.remote.options import SSHOptions
from specdash.remote.ssh import SSHHost
from specdash.server.lifecycle import RunRecord
from specdash.server.remote_session import RemoteSession

CONFIG = """
[modes.first]
engine = "sglang"
model = "/m"
port = 18000

[modes.second]
extends = "first"
port = 18001
"""


def record(run_id: str, mode: str, port: int) -> RunRecord:
    return RunRecord(
        id=run_id, mode=mode, engine="sglang", port=port, pid=4242, pgid=4242, started_at=0.0,
        log_path=f"/tmp/{run_id}/server.log",
    )  # fmt: skip


async def test_a_replaced_watch_no_longer_sets_the_status_and_is_stopped(tmp_path: Path) -> None:
    address = "u@127.0.0.1:1"
    cfg = parse(CONFIG, tmp_path / "config.toml", engines=names())
    session = RemoteSession(SSHHost(address, SSHOptions()), HostConfig(name="h", address=address), cfg)
    session._watch_run(record("a", "first", 18000))
    crashed_watch, crashed_task = session._watch, session._watch_task
    assert crashed_watch is not None and crashed_task is not None
    crashed_watch.emit(ServerStatus(Phase.CRASHED, mode="first", crash=CrashInfo("RuntimeError: tensor a (160)")))
    assert session.status.phase is Phase.CRASHED, "the current watch speaks"

    session._watch_run(record("b", "second", 18001))
    assert (session.status.mode, session.status.phase) == ("second", Phase.LAUNCHING)
    # The crashed run's exit, read late: it must not overwrite the new run's status.
    crashed_watch.emit(ServerStatus(Phase.CRASHED, mode="first", crash=CrashInfo("RuntimeError: tensor a (160)")))
    assert (session.status.mode, session.status.phase) == ("second", Phase.LAUNCHING)
    await asyncio.wait_for(asyncio.gather(crashed_task, return_exceptions=True), timeout=30)
    assert crashed_task.cancelled(), "the replaced watch is stopped, not left running beside the new one"

    new_watch = session._watch
    assert new_watch is not None
    new_watch.emit(ServerStatus(Phase.READY, mode="second"))
    assert (session.status.mode, session.status.phase) == ("second", Phase.READY)
    await session._stop_watching()
    assert session._watch_task is None and not session._retired
