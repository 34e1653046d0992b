"""Sweeps over real sockets against the fake SSE server: levels, store, server death, warnings, the CLI."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from specdash.bench.export import export_csv, export_json
from specdash.bench.probe import ProbeSettings
from specdash.bench.prompts import load_prompts
from specdash.bench.sse import Endpoint
from specdash.bench.store import Store
from specdash.bench.sweep import LevelResult, Sweep, SweepConfig, run_sweep
from specdash.core.events import BenchTick
from specdash.errors import UsageError
from tests.support.fake_server import FakeConfig, FakeServer


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    async with FakeServer(FakeConfig(tokens_per_chunk=3, interval_s=0.002)) as srv:
        yield srv


def config(levels: tuple[int, ...], **kw: object) -> SweepConfig:
    base: dict[str, object] = dict(
        mode="eagle3", levels=levels, processes=0, metrics_poll_s=0.05, progress_interval_s=0.05,
        settings=ProbeSettings(endpoint=Endpoint.CHAT, output_len=12),
    )  # fmt: skip
    base.update(kw)
    return SweepConfig(**base)  # type: ignore[arg-type]


async def test_sweep_stores_every_sample_and_reports_levels(server: FakeServer, tmp_path: Path) -> None:
    prompts = load_prompts("code")
    done: list[LevelResult] = []
    with Store(tmp_path / "s.db") as store:
        res = await run_sweep(server.url, config((1, 3), flush_cache=True), prompts, store, on_level_done=done.append)
        assert res.aborted is None and [lv.concurrency for lv in res.levels] == [1, 3]
        assert [lv.concurrency for lv in done] == [1, 3]
        for lv in res.levels:
            assert lv.status == "done"
            assert lv.stats.completed == lv.stats.sent == max(5 * lv.concurrency, 10)
            assert lv.stats.total_output_tokens == 12 * lv.stats.completed
            assert lv.stats.tokens_per_chunk == pytest.approx(3.0)
            assert lv.stats.output_tok_s > 0
            assert lv.server.tok_s is not None  # Δsglang:generation_tokens_total
            assert not [w for w in lv.warnings if "disagree" in w]
        assert set(res.curve()) == {1, 3}
        assert res.run_id is not None
        run = store.run(res.run_id)
        assert run is not None and run.status == "done"
        assert run.meta.prompt_hash == prompts.sha256 and run.meta.prompt_set == "code"
        assert run.meta.endpoint == "chat" and run.meta.output_len == 12
        samples = store.samples(res.run_id)
        assert len(samples) == 10 + 15
        # The same prompts in the same order in every level (and so in every mode).
        assert [s.prompt_index for s in samples[:10]] == list(range(10))
        levels = store.levels(res.run_id)
        assert [lv.status for lv in levels] == ["done", "done"]
        data = json.loads(export_json(store, res.run_id))
        first = data["levels"][0]
        for key in ("completed", "total_output_tokens", "output_throughput", "mean_ttft_ms", "median_ttft_ms",
                    "p99_ttft_ms", "mean_tpot_ms", "mean_itl_ms", "max_concurrency", "request_throughput",
                    "duration", "accept_length", "concurrency"):  # fmt: skip
            assert key in first, key
        assert first["completed"] == 10 and first["max_concurrency"] == 1
        assert len(export_csv(store, res.run_id).splitlines()) == 3
        assert len(export_csv(store, res.run_id, samples=True).splitlines()) == 26
    assert server.health_calls == 0  # never poll /health during a benchmark
    assert server.flushes == 2


async def test_server_death_fails_the_level_and_keeps_finished_ones(server: FakeServer, tmp_path: Path) -> None:
    # Level 1: 1 warmup + 10 requests; level 2: 2 warmup, then the server dies after 3 more requests.
    server.config.die_after_requests = 1 + 10 + 2 + 3
    with Store(tmp_path / "s.db") as store:
        res = await run_sweep(server.url, config((1, 2, 4)), load_prompts("chat"), store)
        assert [lv.status for lv in res.levels] == ["done", "failed"]
        assert res.aborted is not None and "unreachable" in res.aborted
        assert res.levels[1].stats.failed >= 1
        assert res.run_id is not None
        run = store.run(res.run_id)
        assert run is not None and run.status == "failed"
        stored = store.levels(res.run_id)
        assert [lv.status for lv in stored] == ["done", "failed"]
        assert len(store.samples(res.run_id, stored[0].id)) == 10


async def test_a_dead_server_fails_the_level_at_its_warmup(server: FakeServer, tmp_path: Path) -> None:
    # Level 1: 1 warmup + 10 requests, then the server is gone. Level 2's warmup finds it dead: the level fails
    # there, without sending its measured requests to a server that is not there.
    server.config.die_after_requests = 1 + 10
    with Store(tmp_path / "s.db") as store:
        res = await run_sweep(server.url, config((1, 2, 4)), load_prompts("chat"), store)
        assert [lv.status for lv in res.levels] == ["done", "failed"]
        failed = res.levels[1]
        assert failed.abort_reason is not None and "warm-up" in failed.abort_reason, failed.abort_reason
        assert failed.stats.sent == 0
        assert res.run_id is not None
        stored = store.levels(res.run_id)
        assert [lv.status for lv in stored] == ["done", "failed"]
        assert store.samples(res.run_id, stored[1].id) == []


async def test_server_cap_and_client_view_warnings(server: FakeServer) -> None:
    server.config.max_running_requests = 2
    res = await run_sweep(server.url, config((4,), requests_per_level=8), load_prompts("chat"))
    assert any("caps running requests at 2" in w for w in res.levels[0].warnings)


async def test_sweep_in_probe_processes_with_live_progress(server: FakeServer) -> None:
    progress: list[BenchTick] = []
    cfg = config(
        (2,), processes=None, requests_per_level=20, settings=ProbeSettings(endpoint=Endpoint.GENERATE, output_len=30)
    )
    server.config.interval_s = 0.005
    res = await run_sweep(server.url, cfg, load_prompts("chat"), on_progress=progress.append)
    lv = res.levels[0]
    assert lv.status == "done" and lv.stats.completed == 20 and lv.stats.total_output_tokens == 600
    assert len(lv.headroom) == 1 and lv.headroom[0].events == 20 * 10
    assert progress[0].phase == "warmup"
    running = [p for p in progress if p.phase == "running"]
    assert running and running[-1].total == 20
    assert any(p.tok_s > 0 for p in running)


async def test_cli_bench_compare_export(server: FakeServer, tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}

    async def cli(*args: str) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "specdash", *args, "--db", db, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode is not None
        return proc.returncode, out.decode(), err.decode()

    common = (
        "--url",
        server.url,
        "--levels",
        "1,2",
        "--requests-per-level",
        "4",
        "--output-len",
        "9",
        "--processes",
        "0",
    )
    rc, out, err = await cli("bench", *common, "--mode", "base")
    assert rc == 0, err
    assert "run 1 (base" in out and "done" in out
    server.config.tokens_per_chunk = 1
    rc, out, err = await cli("bench", *common, "--mode", "spec", "--json")
    assert rc == 0, err
    result = json.loads(out)
    assert result["run_id"] == 2 and [lv["stats"]["completed"] for lv in result["levels"]] == [4, 4]
    rc, out, _ = await cli("compare", "1", "2")
    assert rc == 0 and "base#1" in out and "spec#2" in out and "speedup" in out and "verdict: spec" in out
    rc, out, _ = await cli("export", "2", "--json")
    assert rc == 0 and json.loads(out)["levels"][1]["max_concurrency"] == 2
    # Repeats: three more runs of `spec`, pooled per level (median ± MAD); compare pools repeated modes too.
    rc, out, err = await cli("bench", *common, "--mode", "spec", "--repeats", "3", "--json")
    assert rc == 0, err
    pooled = json.loads(out)["spec"]
    assert [r["run_id"] for r in pooled["runs"]] == [3, 4, 5]
    assert pooled["pooled"]["1"]["n"] == 3 and pooled["pooled"]["2"]["median"] > 0
    rc, out, _ = await cli("compare", "1", "2", "3", "4", "5")
    assert rc == 0 and "spec (median ± MAD, n)" in out and "(4)" in out and "(1)" in out, out
    rc, _, err = await cli("export", "99", "--csv")
    assert rc == 2 and "no run 99" in err


async def test_cancelled_sweep_is_marked_interrupted_and_keeps_samples(server: FakeServer, tmp_path: Path) -> None:
    server.config.interval_s = 0.01
    with Store(tmp_path / "s.db") as store:
        holder: list[asyncio.Task[object]] = []

        def on_progress(p: BenchTick) -> None:
            if p.phase == "running" and p.done >= 2:
                holder[0].cancel()

        cfg = config((2,), requests_per_level=200, progress_interval_s=0.02)
        holder.append(
            asyncio.create_task(run_sweep(server.url, cfg, load_prompts("chat"), store, on_progress=on_progress))
        )
        with pytest.raises(asyncio.CancelledError):
            await holder[0]
        run = store.runs()[0]
        assert run.status == "interrupted"
        assert [lv.status for lv in store.levels(run.id)] == ["interrupted"]
        assert 2 <= len(store.samples(run.id)) < 200


async def test_results_map_to_session_events(server: FakeServer) -> None:
    ticks: list[BenchTick] = []
    res = await run_sweep(
        server.url, config((2,), requests_per_level=10), load_prompts("chat"), on_progress=ticks.append
    )
    row = res.levels[0].to_row()
    assert (row.mode, row.concurrency, row.status, row.ok, row.failed) == ("eagle3", 2, "done", 10, 0)
    assert row.tok_s == res.levels[0].stats.output_tok_s
    tick = ticks[-1]
    assert (tick.mode, tick.concurrency) == ("eagle3", 2)


async def test_two_probe_processes_share_one_request_order(server: FakeServer, tmp_path: Path) -> None:
    prompts = load_prompts("code")
    with Store(tmp_path / "s.db") as store:
        res = await run_sweep(server.url, config((4,), processes=2, requests_per_level=60), prompts, store)
        assert res.run_id is not None
        samples = store.samples(res.run_id)
    lv = res.levels[0]
    assert lv.status == "done" and len(lv.headroom) == 2
    assert sorted(s.index for s in samples) == list(range(60))
    assert {s.worker for s in samples} == {0, 1}
    assert all(s.prompt_index == s.index % len(prompts.prompts) for s in samples)
    assert lv.stats.total_output_tokens == 60 * 12


async def test_vllm_server_view_from_counter_deltas(server: FakeServer, tmp_path: Path) -> None:
    server.config.engine = "vllm"
    server.config.tokens_per_chunk = 4
    with Store(tmp_path / "s.db") as store:
        res = await run_sweep(server.url, config((2,), requests_per_level=10), load_prompts("chat"), store)
        assert res.run_id is not None
        run = store.run(res.run_id)
    assert run is not None and (run.meta.engine, run.meta.engine_version) == ("vllm", "0.32.0")
    view = res.levels[0].server
    # 12 tokens in chunks of 4: three verify steps per request, acceptance length 1 + 9/3 = 4.
    assert view.accept_length == pytest.approx(4.0)
    assert "vllm" in view.accept_source
    assert view.tok_s == pytest.approx(res.levels[0].stats.output_tok_s_wall)


async def test_a_starved_client_marks_the_level_client_limited(server: FakeServer) -> None:
    server.config.interval_s = 0.01
    hogged: list[bool] = []

    def hog(p: BenchTick) -> None:
        # A UI freezing the probe's own event loop (processes=0) for longer than two ticker periods, once:
        # some tick is then at least 0.1 s late, whatever the phase. Worker processes exist to avoid this.
        if p.phase == "running" and not hogged:
            hogged.append(True)
            end = time.perf_counter() + 0.6
            while time.perf_counter() < end:
                pass

    res = await run_sweep(server.url, config((2,), requests_per_level=20), load_prompts("chat"), on_progress=hog)
    lv = res.levels[0]
    assert hogged and lv.client_limited
    assert lv.headroom[0].loop_lag_max_ms >= 100
    assert any(w.startswith("client-limited") for w in lv.warnings)
    assert lv.to_json()["client_limited"] is True


@pytest.mark.parametrize("link_in_process", [False, True])
async def test_a_busy_sweep_process_is_the_ui_lagging_unless_it_carries_the_link(
    server: FakeServer, link_in_process: bool
) -> None:
    """With the probe in a worker process, a stalled sweep process (the UI) cannot touch the measurement on a
    direct URL: the level says the UI lagged, and is not flagged. When that process carries the SSH forward,
    its stalls delay every stream, and count against the window they can shift. Freeze it for 30 ms at every
    progress tick (every 50 ms)."""
    server.config.interval_s = 0.01

    def hog(p: BenchTick) -> None:
        if p.phase == "running":
            end = time.perf_counter() + 0.03
            while time.perf_counter() < end:
                pass

    cfg = config((2,), requests_per_level=30, processes=1, progress_interval_s=0.05)
    sweep = Sweep(server.url, cfg, load_prompts("chat"), on_progress=hog, link_in_process=link_in_process)
    lv = (await sweep.run()).levels[0]
    assert lv.parent is not None and lv.parent.loop_lag_p99_ms >= 20, lv.parent
    window_s = lv.stats.window.end_ns - lv.stats.window.start_ns if lv.stats.window else 0
    if not link_in_process:
        # The stalls are the UI's, never evidence against the measurement. (The hog spins most of a core of a
        # 2-core machine, so the probe process itself may be starved, lag and not sustain C: that is the probe's
        # own lag and the idle share, evidence judged on its own, not this attribution. Beside five other
        # workers its lag p90 was 11.2 ms against a 1.1 s window, over the 1 % rule: ci37.)
        assert not any("SSH forward" in r for r in lv.client_limits), lv.client_limits
        assert any(w.startswith("the UI lagged") for w in lv.warnings), lv.warnings
    elif lv.parent.loop_lag_p90_ms / 1000 > 0.01 * window_s / 1e9:
        assert lv.client_limited and any("SSH forward" in r for r in lv.client_limits), lv.client_limits
    else:  # within its bound: a note, never a flag
        assert not any("SSH forward" in r for r in lv.client_limits), lv.client_limits


async def test_duration_mode_level(server: FakeServer) -> None:
    progress: list[BenchTick] = []
    res = await run_sweep(server.url, config((2,), duration_s=0.3), load_prompts("chat"), on_progress=progress.append)
    lv = res.levels[0]
    assert lv.status == "done" and lv.stats.completed >= 2 and lv.stats.failed == 0
    assert lv.stats.wall_s < 2.0
    assert all(p.total is None for p in progress if p.phase == "running")


async def test_a_dead_link_seen_before_the_loss_event_pauses_and_reruns_the_level(tmp_path: Path) -> None:
    """The link dies under a level before anyone reports it (a cut link is declared lost only by keepalive):
    the level's requests fail, the sweep asks `check_link`, hears "down", stores the attempt `interrupted`,
    pauses, and once `link_restored()` comes (the server answers again on the same port) runs it again."""
    server = FakeServer(FakeConfig(tokens_per_chunk=3, interval_s=0.002, die_after_requests=1 + 10 + 2 + 3))
    port = await server.start()
    checks: list[bool] = []
    paused = asyncio.Event()

    async def check_link() -> bool:
        checks.append(False)
        return False

    def progress(p: BenchTick) -> None:
        if p.phase == "paused":
            paused.set()

    with Store(tmp_path / "s.db") as store:
        sweep = Sweep(server.url, config((1, 2)), load_prompts("chat"), store, on_progress=progress,
                      check_link=check_link)  # fmt: skip
        task = asyncio.create_task(sweep.run())
        await asyncio.wait_for(paused.wait(), 30)
        assert not task.done()
        back = FakeServer(FakeConfig(tokens_per_chunk=3, interval_s=0.002))
        await back.start(port)  # the forward listens on the same port again
        try:
            sweep.link_restored()
            res = await asyncio.wait_for(task, 30)
        finally:
            await back.stop()
            await server.stop()
        assert checks == [False]
        assert res.aborted is None and [(lv.concurrency, lv.status) for lv in res.levels] == [(1, "done"), (2, "done")]
        assert sweep.interruptions and sweep.interruptions[0][0] == 2
        assert res.run_id is not None
        stored = store.levels(res.run_id)
        assert [(lv.concurrency, lv.status) for lv in stored] == [(1, "done"), (2, "interrupted"), (2, "done")]
        assert stored[1].abort_reason is not None and stored[1].abort_reason.startswith("link lost")
        cut = store.samples(res.run_id, stored[1].id)
        assert cut and any(not s.ok for s in cut) and all(s.detail for s in cut if not s.ok)
        assert len(store.samples(res.run_id, stored[2].id)) == 10  # the re-run is whole


async def test_a_dead_server_on_a_live_link_still_ends_the_sweep(server: FakeServer, tmp_path: Path) -> None:
    """`check_link` says the link is fine: the failures are the server's, so the level fails and the sweep ends."""
    server.config.die_after_requests = 1 + 10 + 2 + 3

    async def check_link() -> bool:
        return True

    with Store(tmp_path / "s.db") as store:
        sweep = Sweep(server.url, config((1, 2, 4)), load_prompts("chat"), store, check_link=check_link)
        res = await sweep.run()
        assert [lv.status for lv in res.levels] == ["done", "failed"]
        assert res.aborted is not None and "unreachable" in res.aborted
        assert not sweep.interruptions


def test_link_loss_policy_is_validated() -> None:
    with pytest.raises(UsageError, match="on_link_loss must be one of pause, stop"):
        SweepConfig(on_link_loss="retry")
    with pytest.raises(UsageError, match="link_wait"):
        SweepConfig(link_wait_s=0)


async def test_guards_warn_before_the_first_level_and_slo_and_provenance_are_stored(
    server: FakeServer, tmp_path: Path
) -> None:
    from specdash.bench.store import RunMeta
    from specdash.slo import parse_slo

    server.config.max_running_requests = 2
    warned: list[str] = []
    levels_seen: list[int] = []
    slo = parse_slo("ttft_p90=10s,tpot_p90=10s")
    with Store(tmp_path / "s.db") as store:
        meta = RunMeta(host="h", mode="eagle3", provenance={"command": ["sglang", "--cuda-graph-max-bs", "2"]})

        def level_done(r: LevelResult) -> None:
            levels_seen.append(r.concurrency)
            assert warned  # the warnings came before the first level finished

        res = await run_sweep(server.url, config((1, 4), requests_per_level=8, slo=slo), load_prompts("chat"), store,
                              on_level_done=level_done, run_meta=meta, on_warning=warned.append)  # fmt: skip
        assert levels_seen == [1, 4]
        assert len(warned) == 2
        assert "level 4 above the server's --cuda-graph-max-bs 2" in warned[0]
        assert "level 4 above the server's --max-running-requests 2" in warned[1]
        for lv in res.levels:
            assert lv.slo is not None and lv.slo.meets and lv.slo.attainment == 1.0
            assert lv.slo.token_goodput > 0
        assert res.run_id is not None
        run = store.run(res.run_id)
        assert run is not None and run.meta.provenance is not None
        prov = run.meta.provenance
        assert prov["guards"] == warned and prov["slo"] == slo.spec()
        assert prov["command"] == ["sglang", "--cuda-graph-max-bs", "2"]
        assert prov["workload"]["prompt_hash"] == load_prompts("chat").sha256 and len(prov["fingerprint"]) == 16
        stored = store.levels(res.run_id)[0].result["slo"]
        assert stored["meets"] and stored["attainment"] == 1.0


@pytest.mark.parametrize(("engine", "endpoint"), [("vllm", "completions"), ("sglang", "generate")])
async def test_a_sweep_whose_endpoint_follows_the_engine_probes_the_engines_own(
    engine: str, endpoint: str, tmp_path: Path
) -> None:
    """The dashboard's sweeps (`endpoint_follows_engine`): vLLM has no /generate, SGLang's native one is used."""
    async with FakeServer(FakeConfig(engine=engine)) as srv:
        cfg = config((1,), requests_per_level=2, endpoint_follows_engine=True,
                     settings=ProbeSettings(endpoint=Endpoint.GENERATE, output_len=4))  # fmt: skip
        with Store(tmp_path / "s.db") as store:
            res = await run_sweep(srv.url, cfg, load_prompts("chat"), store)
            assert res.levels[0].status == "done" and res.levels[0].stats.completed == 2
            run = store.run(res.run_id or 0)
        assert run is not None and run.meta.endpoint == endpoint, run
