"""The link to a really remote host (a network namespace) is cut: during a startup, during a sweep.

The cut takes the root-side veth down: packets to the host hit the blackhole route, exactly what a dead
link looks like to TCP (no RST, no FIN). Keepalive (1 s x 3 here) notices it after about 3.5 s.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest

from specdash.bench.probe import ProbeSettings
from specdash.bench.store import Store
from specdash.bench.sweep import SweepConfig
from specdash.core.events import BenchTick, BenchUpdate
from specdash.core.lines import split_lines
from specdash.core.models import Phase
from specdash.remote.events import Connected, Lost, Reconnecting
from specdash.remote.ssh import SSHHost
from specdash.server.remote_session import RemoteSession, running
from tests.integration.conftest import remote_alive
from tests.integration.remote_sim import sim_config
from tests.recorder import Recorder
from tests.reliability.conftest import SETTLED, RemoteHost, state_dir, timing

pytestmark = pytest.mark.netns

CUT_S = 5.0
"""How long the link stays down."""
SIM_PORT = 30000
"""The simulator's port inside the namespace (a namespace has its own ports: no clash possible)."""


async def _hold_cut(remote: RemoteHost, seen: Recorder, cut_at: float, seconds: float) -> tuple[float, float]:
    """Keep the link down for `seconds` since `cut_at` (the fault's duration, not a synchronisation),
    check that the loss was noticed while down, then heal; return (lost_at, healed_at)."""
    await seen.wait_for(lambda ev: seen.first(Lost, cut_at) is not None, timeout=seconds + 10)
    lost = seen.first(Lost, cut_at)
    assert lost is not None
    await asyncio.sleep(max(0.0, cut_at + seconds - time.monotonic()))
    healed = remote.ns.heal()
    assert lost[1] < healed, "the loss was noticed only after the link came back"
    return lost[1], healed


async def test_link_cut_during_startup_resumes_the_log_and_reaches_ready(remote: RemoteHost, tmp_path: Path) -> None:
    """Nothing lost: every log line the server wrote reaches the viewer exactly once and in order (compared
    with the remote file), the server process is the same one (same pid, one run record), and the phase
    goes on to ready. The session reports Lost, then Reconnecting, then Connected (generation 2)."""
    cfg = sim_config(tmp_path, port=SIM_PORT, time_scale=0.03)
    hc = remote.host_config("ns-host", state_dir(tmp_path))
    seen = Recorder()
    session = RemoteSession(SSHHost(remote.target, remote.options), hc, cfg)
    async with running(session, seen):
        await session.start("eagle3")
        status = await session.wait_status([Phase.LOADING_WEIGHTS, Phase.ALLOCATING_KV], timeout=60)
        pid = status.pid
        assert pid is not None
        cut_phase = status.phase
        cut_at = remote.ns.cut()
        lost_at, healed_at = await _hold_cut(remote, seen, cut_at, CUT_S)
        await seen.wait_for(lambda ev: seen.first(Connected, healed_at) is not None, timeout=30)
        connected = seen.first(Connected, healed_at)
        assert connected is not None
        event, connected_at = connected
        assert isinstance(event, Connected) and event.generation == 2
        reconnecting = seen.first(Reconnecting, lost_at)
        assert reconnecting is not None and reconnecting[1] < connected_at
        assert await remote_alive(session.host, pid)  # the server kept running through the cut

        final = await session.wait_status(SETTLED, timeout=90)
        assert final.phase is Phase.READY, final
        assert final.pid == pid
        runs = await session.host.run(f"ls {hc.state_dir}/runs")
        assert len(runs.stdout.split()) == 1  # nothing was launched a second time
        assert session._record is not None
        whole = (await session.host.run(f"cat {session._record.log_path}")).stdout
        restarts = session._watch.follower.restarts if session._watch else -1
    got, want = seen.log_lines(), split_lines(whole)
    # Lines keep arriving after ready: what arrived must be exactly the start of the file.
    assert got == want[: len(got)], "a log line was lost or repeated across the cut"
    assert any("fired up and ready to roll" in line for line in got)
    assert restarts >= 1  # the follower really re-opened its stream from an offset
    timing(
        f"link cut during startup ({cut_phase.value}, {CUT_S:g} s): lost noticed after {lost_at - cut_at:.2f} s; "
        f"reconnected {connected_at - healed_at:.2f} s after the link returned; {len(got)} log lines, none lost"
    )


async def test_link_cut_during_a_sweep_records_every_request(remote: RemoteHost, tmp_path: Path) -> None:
    """Nothing lost: every request the sweep sent is a row in the local store (completed ones with their
    tokens, the ones in flight at the cut as failed with a reason), and the store's counts equal what the
    sweep reported. The cut lasts 5 s (a 60 s cut behaves the same once keepalive has fired after ~3.5 s;
    5 s keeps the suite fast)."""
    cfg = sim_config(tmp_path, port=SIM_PORT, time_scale=0.01)
    hc = remote.host_config("ns-host", state_dir(tmp_path))
    seen = Recorder()
    db = tmp_path / "bench.db"
    store = Store(db)
    sweep_cfg = SweepConfig(
        requests_per_level=100_000,  # the cut ends the level, not the count
        warmup_requests=0,
        processes=0,
        level_timeout_s=60,
        progress_interval_s=0.25,
        settings=ProbeSettings(output_len=64, stall_timeout_s=2.0, request_timeout_s=10.0, connect_timeout_s=2.0),
    )
    session = RemoteSession(SSHHost(remote.target, remote.options), hc, cfg, store=store)
    async with running(session, seen):
        await session.start("baseline")
        assert (await session.wait_status(SETTLED, timeout=60)).phase is Phase.READY
        sweep = asyncio.create_task(session.sweep(["baseline"], [4], config=sweep_cfg))

        def progressed(ev: list[object]) -> bool:
            return any(isinstance(e, BenchTick) and e.done >= 20 for e in ev)

        await seen.wait_for(progressed, timeout=60)
        cut_at = remote.ns.cut()
        lost_at, healed_at = await _hold_cut(remote, seen, cut_at, CUT_S)
        try:
            async with asyncio.timeout(60):
                await sweep
                outcome: object = "finished"
        except Exception as exc:  # noqa: BLE001 - the sweep may end with an error; the store is what counts
            outcome = exc
        ended_at = time.monotonic()
        result = session.results.get("baseline")
    store.close()
    assert result is not None, f"no result for the level: {outcome!r}"
    level = result.levels[0]
    con = sqlite3.connect(db)
    ok, failed = con.execute(
        "SELECT SUM(error IS NULL), SUM(error IS NOT NULL) FROM samples WHERE run_id = ?", (result.run_id,)
    ).fetchone()
    reasons = dict(
        con.execute(
            "SELECT error, COUNT(*) FROM samples WHERE run_id = ? AND error IS NOT NULL GROUP BY error",
            (result.run_id,),
        ).fetchall()
    )
    blank = con.execute(
        "SELECT COUNT(*) FROM samples WHERE run_id = ? AND error IS NOT NULL AND detail = ''", (result.run_id,)
    ).fetchone()[0]
    tokens = con.execute(
        "SELECT MIN(output_tokens) FROM samples WHERE run_id = ? AND error IS NULL", (result.run_id,)
    ).fetchone()[0]
    con.close()
    assert ok >= 20 and ok == level.stats.completed, (ok, level.stats)
    assert failed >= 1 and failed == level.stats.failed, (failed, level.stats, reasons)  # in flight at the cut
    assert blank == 0  # every failure says why
    assert tokens == 64  # the completed ones are whole
    rows = [r for e in seen.of(BenchUpdate) for r in e.rows]  # type: ignore[attr-defined]
    assert rows and rows[-1].status in ("failed", "done")
    timing(
        f"link cut during a sweep ({CUT_S:g} s): loss noticed after {lost_at - cut_at:.2f} s, level ended "
        f"{ended_at - cut_at:.2f} s after the cut; store: {ok} completed + {failed} failed {reasons}, "
        f"sweep reported {level.stats.completed} + {level.stats.failed}"
    )
