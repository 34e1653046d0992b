"""A small sweep (C=1, 4) against the SGLang simulator running as a real subprocess, baseline and EAGLE-3."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from specdash.bench.probe import ProbeSettings
from specdash.bench.prompts import load_prompts
from specdash.bench.sse import Endpoint
from specdash.bench.sweep import SweepConfig, SweepResult, run_sweep
from tests.support.ports import free_port

READY = "The server is fired up and ready to roll!"
EAGLE = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d", "--speculative-num-steps", "3",
         "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]  # fmt: skip


def start_sim(extra: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    cmd = [sys.executable, "-m", "specdash", "sim", "--model-path", "/m", "--port", str(port),
           "--sim-time-scale", "0.02", "--enable-metrics", *extra]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    seen = b""
    # Wait for the ready line in the simulator's own log (an event, not a sleep).
    while READY.encode() not in seen:
        left = deadline - time.monotonic()
        if left <= 0 or proc.poll() is not None:
            stop_sim(proc)
            pytest.fail(f"simulator did not become ready: {seen[-2000:].decode(errors='replace')}")
        ready, _, _ = select.select([proc.stdout], [], [], left)
        if ready:
            seen += os.read(proc.stdout.fileno(), 65536)
    # Keep draining the log so a full pipe never blocks the simulator.
    threading.Thread(target=_drain, args=(proc.stdout.fileno(),), daemon=True).start()
    return proc, f"http://127.0.0.1:{port}"


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 65536):
            pass
    except OSError:
        pass


def stop_sim(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@pytest.fixture
def sim_baseline() -> Iterator[str]:
    proc, url = start_sim([])
    try:
        yield url
    finally:
        stop_sim(proc)


@pytest.fixture
def sim_eagle() -> Iterator[str]:
    proc, url = start_sim(EAGLE)
    try:
        yield url
    finally:
        stop_sim(proc)


def cfg(mode: str) -> SweepConfig:
    return SweepConfig(
        mode=mode, levels=(1, 4), requests_per_level=4, warmup_requests=1, processes=0, metrics_poll_s=0.5,
        settings=ProbeSettings(endpoint=Endpoint.GENERATE, output_len=16, stall_timeout_s=20, request_timeout_s=60),
    )  # fmt: skip


def check(res: SweepResult) -> None:
    assert res.aborted is None
    for lv in res.levels:
        assert lv.status == "done" and lv.stats.completed == 4 and lv.stats.failed == 0
        assert lv.stats.total_output_tokens == 4 * 16  # the server's counts, not chunks
        assert lv.stats.estimated == 0 and lv.stats.short == 0
        assert lv.server.tok_s is not None


async def test_sweep_against_the_simulator(sim_baseline: str, sim_eagle: str) -> None:
    prompts = load_prompts("chat")
    base = await run_sweep(sim_baseline, cfg("baseline"), prompts)
    spec = await run_sweep(sim_eagle, cfg("eagle3"), prompts)
    check(base)
    check(spec)
    b1 = base.levels[0].stats.per_request_tok_s.p50
    s1 = spec.levels[0].stats.per_request_tok_s.p50
    assert b1 is not None and s1 is not None
    assert 30 < b1 < 110  # calibrated near 70 tok/s per request at C=1
    assert s1 > b1  # EAGLE-3 wins at C=1
    # Speculation: several tokens per chunk and an acceptance length from /generate's final meta_info.
    assert spec.levels[0].stats.tokens_per_chunk is not None and spec.levels[0].stats.tokens_per_chunk > 1.3
    assert spec.levels[0].stats.accept_length is not None and spec.levels[0].stats.accept_length > 1.3
    # One token per step without speculation; a loaded client may now and then read two events as one chunk.
    assert base.levels[0].stats.tokens_per_chunk is not None and base.levels[0].stats.tokens_per_chunk < 1.1
