"""The simulator starts like SGLang: the log sequence phase by phase, and refused -> 503 -> 200 on /health."""

from __future__ import annotations

import asyncio
import re
import time

import pytest

from tests.support.ports import free_port
from tests.support.sim_harness import READY, Simulators, probe_health

# engines.md 5.8, version-tolerant patterns.
PREFIX = r"\[(\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d(\.\d+)?( DP\d+)?( PP\d+)?( TP\d+)?( EP\d+)?\]"
WEIGHTS = r"Load weight (begin|end)"
SHARDS = r"Loading safetensors checkpoint shards:\s+(\d+)% Completed \| (\d+)/(\d+)"
CAPTURE = re.compile(r"Capture .*?(cuda|CUDA) graph (begin|end)", re.IGNORECASE)
COUNTDOWN = r"Capturing batches \(bs=(\d+)"


@pytest.mark.parametrize("style", ["sglang-0.5", "sglang-2026"])
async def test_eagle3_startup_log_in_order(sim: Simulators, style: str) -> None:
    port = free_port()
    p = await sim(
        "--model-path", "/models/kimi", "--tp", "4", "--speculative-algorithm", "EAGLE3",
        "--sim-log-style", style, port=port,
    )  # fmt: skip
    w = p.wait_for
    await w("Max running requests is reset to 48 for speculative decoding", 10)
    await w(r"^\[[^\]]+\] server_args=ServerArgs\(model_path='/models/kimi'", 10)
    await w(r"^" + PREFIX + r" Init torch distributed begin\.", 10)
    await w(r"TP0\] Init torch distributed ends\.", 10)
    await w(r"TP0\] " + WEIGHTS, 10)
    first = await w(SHARDS, 10)
    assert first.group(3) == "64"
    await w(r"Loading safetensors checkpoint shards: 100% Completed \| 64/64", 10)
    m = await w(r"TP0\] Load weight end\. .*type=DeepseekV3ForCausalLM", 10)
    assert m
    await w(r"TP0\] KV Cache is allocated\. .*#tokens: \d+, KV size: [\d.]+ GB", 10)
    await w(r"TP0\] Memory pool end\. avail mem=", 10)
    m = await w(CAPTURE, 10)
    assert m.group(2) == "begin"
    sizes = [int((await w(COUNTDOWN, 10)).group(1)) for _ in range(3)]
    assert sizes == sorted(sizes, reverse=True), "bs counts down"
    m = await w(re.compile(r"TP0\] Capture (target verify CUDA|cuda) graph end", re.I), 10)
    await w(r"TP0\] Load weight end\. .*type=LlamaForCausalLMEagle3", 10)
    await w(re.compile(r"TP0\] Capture draft (decode CUDA|cuda) graph begin", re.I), 10)
    await w(re.compile(r"TP0\] Capture draft (decode CUDA|cuda) graph end", re.I), 10)
    await w(re.compile(r"TP0\] Capture draft extend (CUDA|cuda) graph end", re.I), 10)
    await w(r"TP0\] max_total_num_tokens=\d+, .*max_running_requests=48, ", 10)
    await w(r"INFO:     Started server process \[\d+\]", 10)
    await w(r"INFO:     Application startup complete\.", 10)
    await w(rf"INFO:     Uvicorn running on http://127\.0\.0\.1:{port} \(Press CTRL\+C to quit\)", 10)
    await w(r'"GET /get_model_info HTTP/1\.1" 200 OK', 10)
    await w(r"TP0\] Prefill batch[.,] #new-seq: 1", 10)
    await w(r'"POST /generate HTTP/1\.1" 200 OK', 10)
    await w(READY, 10)
    assert await probe_health(port) == 200
    # Every TP rank logs its own distributed init and graph end, with its own prefix.
    for rank in range(4):
        assert any(f"TP{rank}] Capture" in line and "end" in line for line in p.lines), rank
    if style == "sglang-2026":
        assert "\rLoading safetensors" in p.raw and "Capture target verify CUDA graph begin. backend=" in p.raw
        assert any(re.search(r"Load weight end\. elapsed=[\d.]+ s, type=", line) for line in p.lines)
    else:
        assert "| 1/64 [" in p.raw and "\rLoading safetensors" not in p.raw
        assert any("Capture cuda graph begin. This can take up to several minutes." in ln for ln in p.lines)


async def test_baseline_has_no_draft_phases_and_tp1_has_no_tag(sim: Simulators) -> None:
    port = free_port()
    p = await sim("--model-path", "meta-llama/Llama-3.1-8B-Instruct", port=port, scale=0.01)
    await p.wait_for(READY, 20)
    text = "\n".join(p.lines)
    assert "Capture draft" not in text and "Eagle" not in text
    assert " TP0]" not in text, "a TP=1 scheduler has no TP tag"
    assert "max_running_requests=4096" in text
    assert "Loading safetensors checkpoint shards: 100% Completed | 4/4" in text


async def test_health_goes_refused_then_503_then_200(sim: Simulators) -> None:
    port = free_port()
    # The small preset at 0.1 starts in ~3 s. Its own warmup is ~0.4 s, which a probe loop starved by a
    # loaded machine missed (CI, stop 34: [None, 200]); so did a 3.5 s one (ci53: six workers and two CPU
    # hogs on two cores). A warmup 10 s longer: the window costs wall time only (the server waits).
    p = await sim(
        "--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--sim-fault", "slow-warmup=100", port=port, scale=0.1
    )
    seen: list[int | None] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status = await probe_health(port, timeout=5)
        if not seen or seen[-1] != status:
            seen.append(status)
        if status == 200:
            break
        await asyncio.sleep(0.005)
    assert seen == [None, 503, 200], seen
    # The listener only appeared after every graph was captured.
    assert p.lines.index(next(ln for ln in p.lines if "Uvicorn running" in ln)) > p.lines.index(
        next(ln for ln in p.lines if "Capture cuda graph end" in ln)
    )


async def test_full_size_start_takes_about_550_seconds_unscaled() -> None:
    import argparse

    from specdash.sim.args import add_arguments, resolve

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    spec, _ = resolve(
        parser.parse_args(["--model-path", "/models/kimi", "--tp", "8", "--speculative-algorithm", "EAGLE3"])
    )
    base, _ = resolve(parser.parse_args(["--model-path", "/models/kimi", "--tp", "8"]))
    from specdash.sim.startup import total_startup_seconds

    assert 500 <= total_startup_seconds(spec) <= 600
    assert 400 <= total_startup_seconds(base) < total_startup_seconds(spec)
