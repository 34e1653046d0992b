"""The link to a really remote host (a network namespace) is cut: during a startup, during a sweep.

The cut takes the root-side veth down: packets to the host hit the blackhole route, exactly what a dead
link looks like to TCP (no RST, no FIN). Keepalive (1 s x 3 here) notices it after about 3.5 s.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from specdash.bench.probe import ProbeSettings
from specdash.bench.store import Store
from specdash.bench.sweep import SweepConfig
from specdash.core.events import BenchTick, BenchUpdate
from specdash.core.lines import split_lines
from specdash.phases import SETTLED, Phase
from specdash.remote.events import Connected, Lost, Reconnecting
from specdash.remote.ssh import SSHHost
from specdash.server.probe_agent import HostRunner
from specdash.server.remote_session import RemoteSession, running
from tests.integration.conftest import remote_alive
from tests.reliability.conftest import RemoteHost, state_dir, timing
from tests.support.eventually import eventually
from tests.support.recorder import Recorder
from tests.support.remote_sim import sim_config
from tests.support.sshd import TEST_HOME

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
    # The batches carry the tracker's cleaned lines (trailing blanks dropped): compare them cleaned.
    got, want = [x.rstrip() for x in seen.log_lines()], [x.rstrip() for x in split_lines(whole)]
    # Lines keep arriving after ready: what arrived must be exactly the start of the file.
    assert got == want[: len(got)], "a log line was lost or repeated across the cut"
    assert any("fired up and ready to roll" in line for line in got)
    # The old channel died with connection 1, so lines after the cut came from a stream re-opened at an offset.
    timing(
        f"link cut during startup ({cut_phase.value}, {CUT_S:g} s): lost noticed after {lost_at - cut_at:.2f} s; "
        f"reconnected {connected_at - healed_at:.2f} s after the link returned; {len(got)} log lines, none lost"
    )


def _sweep_config(policy: str, requests: int | None) -> SweepConfig:
    return SweepConfig(
        requests_per_level=requests,
        min_requests_factor=10,
        warmup_requests=0,
        processes=0,
        level_timeout_s=120,
        progress_interval_s=0.25,
        on_link_loss=policy,
        link_wait_s=120,
        settings=ProbeSettings(output_len=64, stall_timeout_s=2.0, request_timeout_s=10.0, connect_timeout_s=2.0),
    )


def _bench_session(remote: RemoteHost, tmp_path: Path) -> tuple[RemoteSession, Recorder, Store, Path]:
    """A session on the namespace host with the simulator's modes and a store of its own."""
    cfg = sim_config(tmp_path, port=SIM_PORT)
    hc = remote.host_config("ns-host", state_dir(tmp_path))
    db = tmp_path / "bench.db"
    store = Store(db)
    return RemoteSession(SSHHost(remote.target, remote.options), hc, cfg, store=store), Recorder(), store, db


Attempt = tuple[int, str, str | None, int, int, dict[str, int], int]


def _store_counts(db: Path, run_id: int | None) -> tuple[list[Attempt], int | None]:
    """Per level attempt (in order): concurrency, status, reason, completed, failed, failure reasons, and
    how many failures carry no detail; and the smallest token count of a completed request."""
    con = sqlite3.connect(db)
    try:
        attempts: list[Attempt] = []
        for level_id, c, status, reason in con.execute(
            "SELECT id, concurrency, status, abort_reason FROM levels WHERE run_id = ? ORDER BY id", (run_id,)
        ).fetchall():
            ok, failed, blank = con.execute(
                "SELECT COALESCE(SUM(error IS NULL), 0), COALESCE(SUM(error IS NOT NULL), 0),"
                " COALESCE(SUM(error IS NOT NULL AND detail = ''), 0) FROM samples WHERE level_id = ?",
                (level_id,),
            ).fetchone()
            errors = dict(
                con.execute(
                    "SELECT error, COUNT(*) FROM samples WHERE level_id = ? AND error IS NOT NULL GROUP BY error",
                    (level_id,),
                ).fetchall()
            )
            attempts.append((c, status, reason, ok, failed, errors, blank))
        shortest = con.execute(
            "SELECT MIN(output_tokens) FROM samples WHERE run_id = ? AND error IS NULL", (run_id,)
        ).fetchone()[0]
    finally:
        con.close()
    return attempts, shortest


async def test_link_cut_60s_during_a_sweep_pauses_and_runs_the_level_again(remote: RemoteHost, tmp_path: Path) -> None:
    """A 60 s cut in the middle of level C=2 (policy `pause`). Nothing lost: the requests in flight at the
    cut are stored as failed with a reason, the completed ones whole; the attempt is stored `interrupted`;
    the sweep shows `paused`, waits, and once the link is back (same forward port, generation 2) runs C=2
    again and then C=4; the store's counts of the final levels equal what the sweep reported."""
    session, seen, store, db = _bench_session(remote, tmp_path)
    async with running(session, seen):
        await session.start("baseline")
        assert (await session.wait_status(SETTLED, timeout=60)).phase is Phase.READY
        sweep = asyncio.create_task(session.sweep(["baseline"], [2, 4], config=_sweep_config("pause", 24)))

        def progressed(ev: list[object]) -> bool:
            return any(isinstance(e, BenchTick) and e.concurrency == 2 and e.done >= 6 for e in ev)

        await seen.wait_for(progressed, timeout=60)
        done_before = max(e.done for e in seen.of(BenchTick))  # type: ignore[attr-defined]
        cut_at = remote.ns.cut()
        lost_at, healed_at = await _hold_cut(remote, seen, cut_at, 60.0)

        def paused(ev: list[object]) -> bool:
            return any(isinstance(e, BenchUpdate) and any(r.status == "paused" for r in e.rows) for e in ev)

        paused_at = next((t for e, t in zip(seen.events, seen.times, strict=True) if paused([e])), None)
        assert paused_at is not None and paused_at < healed_at, "the sweep did not say it was paused during the cut"
        await seen.wait_for(lambda ev: seen.first(Connected, healed_at) is not None, timeout=30)
        connected = seen.first(Connected, healed_at)
        assert connected is not None and connected[0].generation == 2  # type: ignore[attr-defined]
        async with asyncio.timeout(120):
            await sweep  # finishes: nothing raised
        ended_at = time.monotonic()
        resumed = seen.first(BenchTick, connected[1])
        result = session.results["baseline"]
    store.close()
    assert result.aborted is None, result.aborted
    assert [(lv.concurrency, lv.status) for lv in result.levels] == [(2, "done"), (4, "done")]
    attempts, shortest = _store_counts(db, result.run_id)
    assert [(a[0], a[1]) for a in attempts] == [(2, "interrupted"), (2, "done"), (4, "done")], attempts
    _, _, reason, ok_cut, failed_cut, errors_cut, blank = attempts[0]
    assert reason and reason.startswith("link lost"), reason
    assert ok_cut + failed_cut > done_before  # every request finished before the cut is stored, and those in flight
    assert failed_cut >= 1 and blank == 0, errors_cut  # in flight at the cut: failed, each with its reason
    for (c, _, _, ok, failed, _, _), level in zip(attempts[1:], result.levels, strict=True):
        assert (ok, failed) == (level.stats.completed, level.stats.failed) == (24, 0), (c, ok, failed)
    assert shortest == 64  # completed requests are whole
    assert resumed is not None
    timing(
        f"link cut 60 s during a sweep (pause): loss noticed after {lost_at - cut_at:.2f} s, paused "
        f"{paused_at - cut_at:.2f} s after the cut; reconnected {connected[1] - healed_at:.2f} s and the level "
        f"running again {resumed[1] - healed_at:.2f} s after the link returned; sweep done "
        f"{ended_at - healed_at:.1f} s after; interrupted attempt stored {ok_cut} completed + {failed_cut} failed "
        f"{errors_cut}"
    )


async def test_link_cut_during_a_sweep_with_policy_stop_ends_it_and_keeps_everything(
    remote: RemoteHost, tmp_path: Path
) -> None:
    """Policy `stop`, a 5 s cut during C=4 after C=1 finished: the sweep ends with the reason; C=1 is kept as
    it was; C=4 is failed with every request it sent stored (failures with their reason); nothing re-runs."""
    session, seen, store, db = _bench_session(remote, tmp_path)
    async with running(session, seen):
        await session.start("baseline")
        assert (await session.wait_status(SETTLED, timeout=60)).phase is Phase.READY
        # 10 x C requests per level: C=1 takes about 9 s, C=4 (40 requests) as long; the cut comes early in C=4.
        sweep = asyncio.create_task(session.sweep(["baseline"], [1, 4], config=_sweep_config("stop", None)))
        await seen.wait_for(lambda ev: any(isinstance(e, BenchTick) and e.concurrency == 4 for e in ev), timeout=60)
        cut_at = remote.ns.cut()
        lost_at, healed_at = await _hold_cut(remote, seen, cut_at, CUT_S)
        async with asyncio.timeout(60):
            await sweep
        ended_at = time.monotonic()
        result = session.results["baseline"]
    store.close()
    assert result.aborted and "link lost" in result.aborted, result.aborted
    attempts, shortest = _store_counts(db, result.run_id)
    assert [(a[0], a[1]) for a in attempts] == [(1, "done"), (4, "failed")], attempts
    for (c, _, _, ok, failed, _, blank), level in zip(attempts, result.levels, strict=True):
        assert (ok, failed) == (level.stats.completed, level.stats.failed), (c, ok, failed, level.stats)
        assert blank == 0
    assert attempts[1][4] >= 1
    assert shortest == 64
    timing(
        f"link cut {CUT_S:g} s during a sweep (stop): loss noticed after {lost_at - cut_at:.2f} s, sweep ended "
        f"{ended_at - cut_at:.2f} s after the cut; C=1 kept; C=4 stored {attempts[1][3]} completed + "
        f"{attempts[1][4]} failed {attempts[1][5]}"
    )


def _agents(remote: RemoteHost) -> list[int]:
    """Processes in the namespace running this client's agent zipapp (agents and their followers)."""
    from specdash.bench.agent.bundle import build

    name = build().name.encode()
    found = []
    for pid in remote.ns.pids():
        try:
            if name in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


async def _no_agents_left(remote: RemoteHost, within_s: float) -> None:
    await eventually(lambda: _agents(remote), until=lambda left: not left, timeout=within_s, what="probe agents gone")


def _host_records(path: Path) -> tuple[list[tuple[int, int, bool]], list[dict[str, object]]]:
    """(sequence number, request index, ok) of every sample in an agent's record file, and its `done`s."""
    from specdash.bench.agent.wire import sample_from_list

    samples, done = [], []
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        if rec["t"] == "s":
            s = sample_from_list(rec["d"])
            samples.append((int(rec["n"]), s.index, s.ok))
        elif rec["t"] == "done":
            done.append(rec["o"])
    return samples, done


def _host_session(remote: RemoteHost, tmp_path: Path) -> tuple[RemoteSession, Recorder, Store, Path, list[HostRunner]]:
    """`_bench_session`, keeping the host runners it makes (their record files are compared with the store)."""
    session, seen, store, db = _bench_session(remote, tmp_path)
    made: list[HostRunner] = []
    make_for = session._host_runner  # noqa: SLF001 - the test keeps the runners to read their files

    def keep(port: int) -> Callable[[ProbeSettings, tuple[str, ...]], HostRunner]:
        make = make_for(port)
        assert make is not None, "the server's host runs the agent"

        def runner(settings: ProbeSettings, prompts: tuple[str, ...]) -> HostRunner:
            made.append(make(settings, prompts))
            return made[-1]

        return runner

    session._host_runner = keep  # type: ignore[method-assign]
    return session, seen, store, db, made


async def test_link_cut_mid_level_with_the_probe_on_the_host_loses_no_request_and_stores_none_twice(
    remote: RemoteHost, tmp_path: Path
) -> None:
    """The probe on the host (the default over SSH): a 5 s cut in the middle of C=2 does not touch the
    agent's requests (the link is not on their path). The agent measures on; once the link is back the
    client follows its record file again after the last sample it stored. The level is kept, not run again:
    the store holds exactly the requests of the agent's record file on the host, each once, none failed;
    and no agent or follower outlives the sweep."""
    session, seen, store, db, made = _host_session(remote, tmp_path)
    async with running(session, seen):
        await session.start("baseline")
        assert (await session.wait_status(SETTLED, timeout=60)).phase is Phase.READY
        config = replace(_sweep_config("pause", 24), probe="host")
        sweep = asyncio.create_task(session.sweep(["baseline"], [2, 4], config=config))

        def progressed(ev: list[object]) -> bool:
            return any(isinstance(e, BenchTick) and e.concurrency == 2 and e.done >= 6 for e in ev)

        await seen.wait_for(progressed, timeout=60)
        assert _agents(remote), "no agent running on the host during the level"
        done_at_cut = max(e.done for e in seen.of(BenchTick))  # type: ignore[attr-defined]
        cut_at = remote.ns.cut()
        lost_at, healed_at = await _hold_cut(remote, seen, cut_at, CUT_S)
        async with asyncio.timeout(120):
            await sweep
        result = session.results["baseline"]
        await _no_agents_left(remote, within_s=20)
    store.close()
    assert result.probe is not None and result.probe["where"] == "host", result.probe
    assert result.aborted is None, result.aborted
    assert [(lv.concurrency, lv.status) for lv in result.levels] == [(2, "done"), (4, "done")]
    attempts, shortest = _store_counts(db, result.run_id)
    assert [(a[0], a[1]) for a in attempts] == [(2, "done"), (4, "done")], attempts  # nothing ran again
    assert shortest == 64
    (runner,) = made
    assert runner.resumes == 1  # the cut level's records were followed again after the reconnect
    con = sqlite3.connect(db)
    try:
        for n, level in enumerate(result.levels, start=1):
            host, done = _host_records(TEST_HOME / runner.run_dir / f"{n}.jsonl")
            assert [seq for seq, _, _ in host] == list(range(len(host)))  # the agent numbered every sample
            assert len(done) == 1 and done[0]["aborted"] is None, done
            stored = [
                (idx, err is None)
                for idx, err in con.execute(
                    "SELECT idx, error FROM samples WHERE level_id = ? ORDER BY idx", (level.level_id,)
                )
            ]
            # Every request the agent finished is in the store, once; none failed (the cut was not on its path).
            assert stored == sorted((idx, ok) for _, idx, ok in host), (level.concurrency, stored, host)
            assert len(stored) == len({idx for idx, _ in stored}) == 24
            assert all(ok for _, ok in stored)
    finally:
        con.close()
    timing(
        f"link cut {CUT_S:g} s mid-level, probe on the host: loss noticed after {lost_at - cut_at:.2f} s; "
        f"{done_at_cut} requests stored before the cut, level C=2 kept whole (24 stored once, 0 failed, "
        f"{runner.resumes} resume(s) of the agent's records)"
    )


async def test_the_agent_ends_by_itself_when_the_link_is_gone_longer_than_link_wait(
    remote: RemoteHost, tmp_path: Path
) -> None:
    """`link_wait` 3 s and a cut that lasts: the agent (detached, so the cut cannot stop it) notices that the
    client's pings stopped, stops sending, lets its in-flight requests finish, records `done` with the reason,
    and exits, while the link is still down. The sweep gives up after its own `link_wait` (the level's
    records stay on the host)."""
    session, seen, store, db, made = _host_session(remote, tmp_path)
    async with running(session, seen):
        await session.start("baseline")
        assert (await session.wait_status(SETTLED, timeout=60)).phase is Phase.READY
        # 400 requests at C=2: the level would run for minutes; the agent must end long before.
        config = replace(_sweep_config("pause", 400), probe="host", link_wait_s=3.0)
        sweep = asyncio.create_task(session.sweep(["baseline"], [2], config=config))

        def progressed(ev: list[object]) -> bool:
            return any(isinstance(e, BenchTick) and e.concurrency == 2 and e.done >= 2 for e in ev)

        await seen.wait_for(progressed, timeout=60)
        assert _agents(remote), "no agent running on the host during the level"
        cut_at = remote.ns.cut()
        try:
            await _no_agents_left(remote, within_s=60)
            ended_at = time.monotonic()
            async with asyncio.timeout(60):
                await sweep  # gives up too, with the link still down
        finally:
            remote.ns.heal()
        result = session.results["baseline"]
    store.close()
    (runner,) = made
    host, done = _host_records(TEST_HOME / runner.run_dir / "1.jsonl")
    assert len(done) == 1 and "link to the client gone for more than 3 s" in str(done[0]["aborted"]), done
    assert 0 < len(host) < 400
    assert result.aborted is not None and "link lost" in result.aborted, result.aborted
    timing(
        f"link gone > link_wait (3 s) with the probe on the host: the agent ended by itself "
        f"{ended_at - cut_at:.1f} s after the cut, link still down, {len(host)} requests recorded on the host"
    )


async def test_link_cut_with_policy_stop_and_the_probe_on_the_host_ends_the_sweep_and_the_agent(
    remote: RemoteHost, tmp_path: Path
) -> None:
    """Policy `stop`: the level does not wait for the link; it fails with the loss, the sweep ends, and the
    agent (which nobody will follow again) stops once the pings have been gone `PING_GRACE_S`, while the link
    is still down. What the store has of the level is in the agent's record file, each request once."""
    session, seen, store, db, made = _host_session(remote, tmp_path)
    async with running(session, seen):
        await session.start("baseline")
        assert (await session.wait_status(SETTLED, timeout=60)).phase is Phase.READY
        config = replace(_sweep_config("stop", 400), probe="host")
        sweep = asyncio.create_task(session.sweep(["baseline"], [2], config=config))

        def progressed(ev: list[object]) -> bool:
            return any(isinstance(e, BenchTick) and e.concurrency == 2 and e.done >= 2 for e in ev)

        await seen.wait_for(progressed, timeout=60)
        cut_at = remote.ns.cut()
        try:
            async with asyncio.timeout(60):
                await sweep
            ended_at = time.monotonic()
            await _no_agents_left(remote, within_s=60)
            agent_gone_at = time.monotonic()
        finally:
            remote.ns.heal()
        result = session.results["baseline"]
    store.close()
    assert result.aborted is not None and "link" in result.aborted, result.aborted
    assert [(lv.concurrency, lv.status) for lv in result.levels] == [(2, "failed")]
    (runner,) = made
    host, done = _host_records(TEST_HOME / runner.run_dir / "1.jsonl")
    assert len(done) == 1 and "link to the client gone" in str(done[0]["aborted"]), done
    con = sqlite3.connect(db)
    try:
        stored = [
            idx for (idx,) in con.execute("SELECT idx FROM samples WHERE level_id = ?", (result.levels[0].level_id,))
        ]
    finally:
        con.close()
    assert len(stored) == len(set(stored)) and set(stored) <= {idx for _, idx, _ in host}, (stored, host)
    timing(
        f"link cut with policy stop, probe on the host: sweep ended {ended_at - cut_at:.1f} s after the cut, "
        f"the agent {agent_gone_at - cut_at:.1f} s after; {len(stored)} of the {len(host)} host records stored"
    )
