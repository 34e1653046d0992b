"""Server-side faults over the shared loopback sshd: a crash mid-sweep, children that ignore SIGTERM, a
port held by a foreign process. The simulator (or a small launcher) runs as the remote test user."""

from __future__ import annotations

import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from specdash.bench.probe import ProbeSettings
from specdash.bench.store import Store
from specdash.bench.sweep import SweepConfig
from specdash.config import HostConfig
from specdash.core.events import BenchUpdate, ServerStatus
from specdash.errors import SpecdashError
from specdash.phases import Phase
from specdash.remote.ssh import SSHHost, SSHOptions
from specdash.server.lifecycle import Lifecycle, PortBusy
from specdash.server.remote_session import RemoteSession, running
from tests.integration.conftest import remote_alive, target
from tests.reliability.conftest import state_dir, timing
from tests.support.cpuhog import IDLE_AND_HOGGED, cpu_hog
from tests.support.eventually import eventually
from tests.support.ports import free_port
from tests.support.recorder import Recorder
from tests.support.remote_sim import sim_config
from tests.support.sshd import Sshd, make_dir


@pytest.fixture
def host_cfg(sshd: Sshd, tmp_path: Path, ssh_options: SSHOptions, loopback_cleanup: list) -> HostConfig:  # type: ignore[type-arg]
    hc = HostConfig(name="sim-host", address=target(sshd), state_dir=state_dir(tmp_path))
    loopback_cleanup.append((target(sshd), ssh_options, hc))
    return hc


@IDLE_AND_HOGGED
async def test_crash_at_batch_10_fails_the_level_in_flight_and_keeps_earlier_ones(
    sshd: Sshd, ssh_options: SSHOptions, host_cfg: HostConfig, tmp_path: Path, hog: bool
) -> None:
    """Nothing lost: the levels finished before the crash are in the store, complete (status done, every
    request a row, all successful); the level in flight is failed, in the store and in the session's table,
    and the requests the crash cut off are rows failed with their reason; the crash is reported with the
    engine's RuntimeError line."""
    cfg = sim_config(tmp_path, port=free_port())
    db = tmp_path / "bench.db"
    store = Store(db)
    seen = Recorder()
    sweep_cfg = SweepConfig(
        requests_per_level=16,  # C=12 needs more than 10 requests to reach batch 10
        warmup_requests=0,
        processes=0,
        progress_interval_s=0.25,
        settings=ProbeSettings(output_len=16, stall_timeout_s=5.0, request_timeout_s=20.0),
    )
    session = RemoteSession(SSHHost(target(sshd), ssh_options), host_cfg, cfg, store=store)
    with cpu_hog(hog, seconds=300):
        status, reported_s = await _sweep_into_the_crash(session, seen, sweep_cfg)
    store.close()
    _check_the_crash(status, seen, db, reported_s, hog)


async def _sweep_into_the_crash(
    session: RemoteSession, seen: Recorder, sweep_cfg: SweepConfig
) -> tuple[ServerStatus, float]:
    async with running(session, seen):
        began = time.monotonic()
        with pytest.raises(SpecdashError, match="crash crashed during the sweep; finished levels are kept"):
            await session.sweep(["crash"], [1, 2, 12], config=sweep_cfg)
        reported_s = time.monotonic() - began
        return session.status, reported_s


def _check_the_crash(status: ServerStatus, seen: Recorder, db: Path, reported_s: float, hog: bool) -> None:
    assert status.phase is Phase.CRASHED
    assert status.crash is not None
    assert "RuntimeError: The size of tensor a (160) must match the size of tensor b (2)" in status.crash.reason
    rows = {r.concurrency: r for r in seen.of(BenchUpdate)[-1].rows}  # type: ignore[attr-defined]
    assert rows[1].status == rows[2].status == "done"
    assert rows[12].status == "failed" and rows[12].warning
    con = sqlite3.connect(db)
    levels = {
        c: (status, n, ok)
        for c, status, n, ok in con.execute(
            "SELECT l.concurrency, l.status, COUNT(s.id), COALESCE(SUM(s.id IS NOT NULL AND s.error IS NULL), 0) "
            "FROM levels l "
            "LEFT JOIN samples s ON s.level_id = l.id GROUP BY l.id"
        )
    }
    blank = con.execute("SELECT COUNT(*) FROM samples WHERE error IS NOT NULL AND detail = ''").fetchone()[0]
    reasons = dict(con.execute("SELECT error, COUNT(*) FROM samples WHERE error IS NOT NULL GROUP BY error").fetchall())
    con.close()
    assert levels[1] == ("done", 16, 16) and levels[2] == ("done", 16, 16), levels
    # The level in flight is failed, and the requests the crash cut off are rows, failed with a reason.
    status12, n12, ok12 = levels[12]
    assert status12 == "failed" and n12 >= 12 and ok12 < n12, levels
    assert blank == 0
    timing(
        f"crash at batch 10{' under a CPU hog' if hog else ''}: sweep ended {reported_s:.1f} s after it began; "
        f"store levels {levels}, failures {reasons}"
    )


LAUNCHER = """#!/bin/sh
# A server whose children ignore SIGTERM (the parent exits on it): the stop must SIGKILL the group.
trap '' TERM
sleep 1000 &
a=$!
sh -c 'trap "" TERM; sleep 1000' &
echo "children $a $!" > "$0.children"
trap 'exit 0' TERM
echo started
while :; do sleep 0.1; done
"""


async def test_stop_kills_children_that_ignore_sigterm_after_the_grace_period(
    sshd: Sshd, ssh_options: SSHOptions, host_cfg: HostConfig, tmp_path: Path
) -> None:
    """Nothing left: after the grace period the whole process group gets SIGKILL; no member and none
    of the launcher's children survives; the stop report names the ones that ignored SIGTERM."""
    scripts = make_dir("specdash-launcher-")  # readable by the remote test user
    launcher = scripts / "server.sh"
    launcher.write_text(LAUNCHER)
    launcher.chmod(0o755)
    scripts.chmod(0o777)  # the launcher writes its children's pids beside itself
    extra = f'[modes.stubborn]\nengine = "sglang"\nmodel = "/m"\nport = {free_port()}\nlauncher = ["{launcher}"]\n'
    cfg = sim_config(tmp_path, port=free_port(), extra_modes=extra)
    try:
        async with SSHHost(target(sshd), ssh_options) as host:
            life = Lifecycle(host, host_cfg)
            record = await life.start(cfg.mode("stubborn"))

            async def written() -> list[str]:
                return (await host.run(f"cat {launcher}.children 2>/dev/null")).stdout.split()

            words = await eventually(
                written, until=lambda w: len(w) >= 3, timeout=20, what=f"the launcher's children in {launcher}.children"
            )
            children = [int(p) for p in words[1:]]
            began = time.monotonic()
            report = await life.stop(record, grace=1.0)
            took = time.monotonic() - began
            alive = [pid for pid in (record.pid, *children) if await remote_alive(host, pid)]
            members = await host.run(f"ps -eo pgid=,stat= | awk '$1 == {record.pgid} && $2 !~ /^Z/' | wc -l")
    finally:
        shutil.rmtree(scripts, ignore_errors=True)
    assert report.was_running and len(report.members) >= 3, report
    assert len(report.killed) >= 2, report  # both children ignored SIGTERM
    assert report.survivors == [] and alive == [] and members.stdout.strip() == "0"
    assert took < 1.0 + 10, took
    timing(f"stop with SIGTERM-ignoring children (grace 1 s): all gone in {took:.2f} s; killed {len(report.killed)}")


async def test_port_taken_by_a_foreign_process_is_refused_before_launch_naming_it(
    sshd: Sshd, ssh_options: SSHOptions, host_cfg: HostConfig, tmp_path: Path
) -> None:
    """Nothing launched: a port held by another process of the remote user is refused before any launch
    (no run record is written), and the message names the holder (`python3 (pid N)`)."""
    port = free_port()
    cfg = sim_config(tmp_path, port=port)
    holder_cmd = (
        "setsid python3 -c 'import socket,time; s=socket.socket(); "
        f's.bind(("127.0.0.1", {port})); s.listen(); time.sleep(60)\' > /dev/null 2>&1 < /dev/null & echo $!'
    )
    async with SSHHost(target(sshd), ssh_options) as host:
        holder = int((await host.run(holder_cmd)).stdout.split()[0])
        try:
            await eventually(
                lambda: host.run(f"ss -Hltn 'sport = :{port}'"), until=lambda r: r.stdout.strip(), timeout=20,
                what=f"the holder listens on port {port} (ss)",
            )  # fmt: skip
            session = RemoteSession(host, host_cfg, cfg)
            with pytest.raises(PortBusy) as refused:
                await session.start("baseline")
            runs = await host.run(f"ls {host_cfg.state_dir}/runs 2>/dev/null | wc -l")
        finally:
            await host.run(f"kill {holder}")
    assert f"port {port} on sim-host is already in use by python3 (pid {holder})" in refused.value.message
    assert runs.stdout.strip() == "0"
    assert session.status.phase is Phase.STOPPED
