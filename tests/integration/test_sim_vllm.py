"""The simulator's vLLM 0.24 wording (`--sim-log-style vllm-0.24`, issue 26 point 3): real simulator processes,
their output read by specdash's own tracker (`engines.vllm`), their endpoints over real sockets, their GPUs
through the simulated `nvidia-smi`. What the real H100 showed (tests/fixtures/logs/vllm_h100_real): n-gram
prints `Loading drafter model...` with no draft to load, EAGLE-3 loads its own 1/1 shard bar, torch.compile is
long cold and short from its cache, capture ends at `Graph capturing finished`, and silent seconds follow.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import aiohttp

from specdash.core.startup import StartupTracker
from specdash.core.startup_events import PhaseChanged, ProgressChanged
from specdash.phases import Phase
from specdash.sim.gpus import COUNT_ENV, DIR_ENV, install
from specdash.sim.vllm_log import COMPILE_S, DYNAMO_S, SAVE_S, SILENT_S
from tests.integration.test_sim_gpus import nvidia_smi
from tests.support.sim_harness import SimProcess, Simulators

VLLM = ("--model", "/models/llama-8b", "--sim-log-style", "vllm-0.24")
NGRAM = ("--speculative-config", json.dumps({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}))
EAGLE3 = (
    "--speculative-config",
    json.dumps({"method": "eagle3", "model": "/models/eagle3", "num_speculative_tokens": 2}),
)
UP = "Application startup complete."


def track(raw: str) -> tuple[list[PhaseChanged], list[ProgressChanged]]:
    tracker = StartupTracker("vllm")
    events = tracker.feed(raw) + tracker.finish()
    assert tracker.internal_errors == 0
    assert tracker.phase is Phase.READY, tracker.phase
    changes = [e for e in events if isinstance(e, PhaseChanged)]
    return changes, [e for e in events if isinstance(e, ProgressChanged)]


def span(changes: list[PhaseChanged], phase: Phase) -> float:
    i = [c.phase for c in changes].index(phase)
    return changes[i + 1].at - changes[i].at


async def started(sim: Simulators, *args: str, scale: float, env: dict[str, str] | None = None) -> SimProcess:
    proc = await sim(*VLLM, *args, scale=scale, env=env)
    await proc.wait_for(UP, 120)
    return proc


async def test_an_ngram_start_prints_the_drafter_line_but_has_no_draft_phase(sim: Simulators, tmp_path: Path) -> None:
    proc = await started(sim, *NGRAM, scale=0.02, env={"VLLM_CACHE_ROOT": str(tmp_path)})
    assert "Loading drafter model..." in proc.raw
    assert "(EngineCore pid=" in proc.raw and "(APIServer pid=" in proc.raw
    changes, progress = track(proc.raw)
    phases = [c.phase for c in changes]
    assert Phase.LOADING_DRAFT not in phases, phases
    assert phases[-1] is Phase.READY and Phase.COMPILING in phases
    shards = [p.progress for p in progress if p.phase is Phase.LOADING_WEIGHTS]
    assert shards[-1].done == shards[-1].total == 4


async def test_an_eagle3_start_has_a_draft_phase_and_the_targets_shards_stay_the_targets(
    sim: Simulators, tmp_path: Path
) -> None:
    proc = await started(sim, *EAGLE3, scale=0.02, env={"VLLM_CACHE_ROOT": str(tmp_path)})
    assert "Capturing model for speculator..." in proc.raw
    changes, progress = track(proc.raw)
    phases = [c.phase for c in changes]
    assert phases.index(Phase.LOADING_WEIGHTS) < phases.index(Phase.LOADING_DRAFT) < phases.index(Phase.COMPILING)
    assert Phase.CAPTURING_DRAFT_GRAPHS in phases and phases[-1] is Phase.READY
    target = [p.progress for p in progress if p.phase is Phase.LOADING_WEIGHTS]
    draft = [p.progress for p in progress if p.phase is Phase.LOADING_DRAFT]
    assert (target[-1].done, target[-1].total) == (4, 4)
    assert draft and (draft[-1].done, draft[-1].total) == (1, 1)


async def test_compiling_is_shorter_on_a_second_start_with_a_warm_cache(sim: Simulators, tmp_path: Path) -> None:
    scale = 0.3
    spans = []
    for _ in range(2):
        proc = await started(sim, scale=scale, env={"VLLM_CACHE_ROOT": str(tmp_path)})
        changes, _ = track(proc.raw)
        spans.append(span(changes, Phase.COMPILING))
        await proc.close()
    assert "Directly load the compiled graph(s)" in proc.raw and "Compiling a graph" not in proc.raw
    assert os.listdir(tmp_path), "the first start left its compiled graphs in the cache dir"
    cold, warm = spans
    saved = (DYNAMO_S[0] - DYNAMO_S[1] + COMPILE_S[0] - COMPILE_S[1] + SAVE_S) * scale
    # The log's timestamps count whole seconds: allow one second each side (and the seeded +-10 % jitter).
    assert cold - warm >= 0.8 * saved - 2, (cold, warm, saved)
    assert warm < cold


async def test_capture_ends_at_graph_capturing_finished_and_the_silent_seconds_are_warm_up(
    sim: Simulators, tmp_path: Path
) -> None:
    scale = 0.25
    proc = await started(sim, scale=scale, env={"VLLM_CACHE_ROOT": str(tmp_path)})
    changes, _ = track(proc.raw)
    phases = [c.phase for c in changes]
    i = phases.index(Phase.WARMING_UP)
    assert phases[i - 1] is Phase.CAPTURING_GRAPHS and phases[i + 1] is Phase.READY
    lines = proc.raw.splitlines()
    end = next(n for n, line in enumerate(lines) if "Graph capturing finished" in line)
    assert "Kernel JIT monitor activated" in lines[end + 1]  # nothing in between: the silent seconds
    assert span(changes, Phase.WARMING_UP) >= 0.9 * SILENT_S * scale - 1


async def test_sleep_and_wake_need_the_flag_and_dev_mode_and_release_the_gpus(sim: Simulators, tmp_path: Path) -> None:
    gpus = {DIR_ENV: str(tmp_path / "gpus"), COUNT_ENV: "2"}
    bin_dir = tmp_path / "bin"
    install(bin_dir)
    cache = {"VLLM_CACHE_ROOT": str(tmp_path)}
    flag_only = await started(sim, "--enable-sleep-mode", scale=0.01, env={**gpus, **cache})
    dev_only = await started(sim, scale=0.01, env={**gpus, **cache, "VLLM_SERVER_DEV_MODE": "1"})
    async with aiohttp.ClientSession() as http:
        for proc in (flag_only, dev_only):
            base = f"http://127.0.0.1:{proc.port}"
            async with http.post(f"{base}/sleep?level=1") as resp:
                assert resp.status == 404
            async with http.get(f"{base}/is_sleeping") as resp:
                assert resp.status == 404
        await flag_only.close()
        await dev_only.close()

        proc = await started(sim, "--enable-sleep-mode", scale=0.01, env={**gpus, **cache, "VLLM_SERVER_DEV_MODE": "1"})
        base = f"http://127.0.0.1:{proc.port}"
        awake = nvidia_smi(bin_dir, gpus)[0].mem_used_mib
        assert awake > 20 * 1024
        async with http.get(f"{base}/is_sleeping") as resp:
            assert await resp.json() == {"is_sleeping": False}
        async with http.post(f"{base}/sleep?level=1") as resp:
            assert resp.status == 200
        async with http.get(f"{base}/is_sleeping") as resp:
            assert await resp.json() == {"is_sleeping": True}
        async with http.get(f"{base}/health") as resp:
            assert resp.status == 200  # as on the real GPU: health says nothing of sleep
        asleep = nvidia_smi(bin_dir, gpus)[0].mem_used_mib
        assert 1.0 * 1024 < asleep < 1.5 * 1024, asleep
        async with http.post(f"{base}/wake_up") as resp:
            assert resp.status == 200
        async with http.get(f"{base}/is_sleeping") as resp:
            assert await resp.json() == {"is_sleeping": False}
        assert nvidia_smi(bin_dir, gpus)[0].mem_used_mib == awake
    await proc.wait_for(r"It took [\d.]+ seconds to wake up tags", 10)
    assert "It took" in proc.raw and "seconds to fall asleep." in proc.raw
    assert "Sleep mode freed" in proc.raw and "1.27 GiB memory is still in use." in proc.raw


async def test_metrics_and_stats_lines_speak_vllm(sim: Simulators, tmp_path: Path) -> None:
    proc = await started(sim, *NGRAM, scale=0.01, env={"VLLM_CACHE_ROOT": str(tmp_path)})
    base = f"http://127.0.0.1:{proc.port}"
    async with aiohttp.ClientSession() as http:
        body = {"model": "/models/llama-8b", "prompt": "hi", "max_tokens": 64, "ignore_eos": True}
        async with http.post(f"{base}/v1/completions", json=body) as resp:
            assert resp.status == 200
        async with http.get(f"{base}/metrics") as resp:
            text = await resp.text()
        async with http.get(f"{base}/v1/models") as resp:
            assert (await resp.json())["data"][0]["owned_by"] == "vllm"
    values = {line.split("{")[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line[:1] != "#"}
    assert values["vllm:generation_tokens_total"] == 64
    assert values["vllm:spec_decode_num_drafts_total"] > 0
    assert "Decode batch" not in proc.raw and "Prefill batch" not in proc.raw
