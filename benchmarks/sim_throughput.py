"""Measure the SGLang simulator's throughput against its model, and its timing at 256 concurrent streams.

For each mode (baseline, EAGLE-3) this starts one `specdash sim` (Kimi preset, TP=8, short startup,
real decode timing) and drives concurrency 1, 2, 5, 10, 20, 50, 100 over loopback: C streaming
`/v1/completions` requests with `stream_options.continuous_usage_stats`, so every chunk carries the
server's cumulative `usage.completion_tokens` (tokens are never counted from chunks). Each request is long
enough to span the measurement window; the window starts 0.5 s after the last running stream got its first
token and ends at the first finish (requests above the 48-request cap stay queued and count zero, as they
should). Aggregate tok/s = sum over streams of the token increase inside the window, each stream's
cumulative count linearly interpolated at the window edges, divided by the window length. Bounded: one
request per stream per level, cancelled at the end of the window.

Then 256 concurrent streams on plain decoding (speed 1, and `--sim-speed 4` for 4x the event rate), whose
timing error is measured/model - 1. Usage: `python benchmarks/sim_throughput.py [--append]`; with
`--append` the tables go to benchmarks/RESULTS.md (append-only).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import sys
import time
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from specdash.sim.model import TABLE_CONCURRENCY, ThroughputModel, baseline_model, eagle3_model

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ (the simulator harness)
from specdash.ports import free_port  # noqa: E402
from tests.support.sim_harness import SimProcess  # noqa: E402

RESULTS = Path(__file__).with_name("RESULTS.md")
WINDOW_S = 5.0
"""Measurement window per level (seconds)."""


@dataclass
class Stream:
    """`(time, cumulative usage tokens)` per chunk of one request."""

    times: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    done: bool = False

    def at(self, t: float) -> float:
        """Cumulative tokens at `t`, linearly interpolated between chunks (0 before the first)."""
        i = bisect_right(self.times, t)
        if i == 0:
            return 0.0
        if i == len(self.times):
            return float(self.tokens[-1])
        t0, t1 = self.times[i - 1], self.times[i]
        n0, n1 = self.tokens[i - 1], self.tokens[i]
        return n0 + (n1 - n0) * (t - t0) / (t1 - t0) if t1 > t0 else float(n1)


async def one_stream(session: aiohttp.ClientSession, port: int, max_tokens: int, rec: Stream) -> None:
    """One streamed completion; records cumulative usage per chunk."""
    body = {
        "model": "default",
        "prompt": "Explain speculative decoding in detail.",
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    loop = asyncio.get_running_loop()
    async with session.post(f"http://127.0.0.1:{port}/v1/completions", json=body) as resp:
        async for raw in resp.content:
            if not raw.startswith(b"data: {"):
                continue
            chunk = json.loads(raw[6:])
            usage = chunk.get("usage")
            if usage and chunk.get("choices"):
                rec.times.append(loop.time())
                rec.tokens.append(int(usage["completion_tokens"]))
    rec.done = True


async def measure_level(port: int, concurrency: int, model: ThroughputModel) -> float:
    """Aggregate tok/s over a steady-state window at `concurrency` streams."""
    running = min(concurrency, model.max_running)
    per_stream = model.expected_aggregate(concurrency) / running
    max_tokens = int(math.ceil(per_stream * (WINDOW_S + 3.0) * 1.3)) + 8
    streams = [Stream() for _ in range(concurrency)]
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None)) as session:
        tasks = [asyncio.ensure_future(one_stream(session, port, max_tokens, s)) for s in streams]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 120
        # Wait until every stream that can run has its first token, then for the window. Polling the
        # records (not an Event) keeps the per-chunk path of the client free of extra work.
        while sum(1 for s in streams if s.times) < running and loop.time() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.02)
        start = max(s.times[0] for s in streams if s.times) + 0.5
        end = start + WINDOW_S
        while loop.time() < end + 0.3 and not any(s.done for s in streams):  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        finished = [s.times[-1] for s in streams if s.done]
        if finished:
            end = min(end, min(finished) - 0.01)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    total = sum(s.at(end) - s.at(start) for s in streams if s.times)
    return total / (end - start)


async def start_sim(args: list[str]) -> tuple[SimProcess, int]:
    """A ready simulator on a free port."""
    port = free_port()
    sim = SimProcess(["--port", str(port), "--sim-time-scale", "0.002", "--sim-seed", "11", *args])
    await sim.start()
    await sim.wait_for("The server is fired up and ready to roll!", 60)
    return sim, port


async def sweep() -> list[tuple[int, float, float, float, float]]:
    """`(C, baseline measured, baseline model, eagle3 measured, eagle3 model)` rows."""
    kimi = ["--model-path", "/models/kimi", "--tp", "8"]
    results: dict[str, dict[int, tuple[float, float]]] = {}
    for mode, extra, model in (
        ("baseline", [], baseline_model()),
        ("eagle3", ["--speculative-algorithm", "EAGLE3"], eagle3_model()),
    ):
        sim, port = await start_sim(kimi + extra)
        try:
            results[mode] = {}
            for c in TABLE_CONCURRENCY:
                measured = await measure_level(port, c, model)
                results[mode][c] = (measured, model.expected_aggregate(c))
                print(f"{mode:8s} C={c:3d}: {measured:7.1f} tok/s (model {model.expected_aggregate(c):7.1f})")
        finally:
            await sim.close()
    return [(c, *results["baseline"][c], *results["eagle3"][c]) for c in TABLE_CONCURRENCY]


async def streams_256(speed: float) -> tuple[float, float]:
    """Measured and model aggregate for 256 concurrent plain-decoding streams."""
    model = ThroughputModel(speed=speed)
    sim, port = await start_sim(["--model-path", "/models/kimi", "--tp", "8", "--sim-speed", str(speed)])
    try:
        measured = await measure_level(port, 256, model)
    finally:
        await sim.close()
    return measured, model.expected_aggregate(256)


def machine() -> str:
    """CPU model, core count, Python and OS, for RESULTS.md."""
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()} "
        f"{platform.release()}; load average {load}"
    )


async def main() -> int:
    """Run the sweep and the 256-stream check; print (and optionally append) the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--append", action="store_true", help="append the tables to benchmarks/RESULTS.md")
    args = parser.parse_args()
    rows = await sweep()
    big = [(speed, *await streams_256(speed)) for speed in (1.0, 4.0)]
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    out = [
        f"## Simulator throughput vs model ({stamp})",
        "",
        f"Machine: {machine()}. `python benchmarks/sim_throughput.py`; Kimi preset, TP=8, loopback, tokens from",
        "`usage` (continuous_usage_stats), 5 s steady-state windows, one request per stream per level.",
        "Baseline steps are deterministic, so its error is the simulator's timing error; EAGLE-3's also holds",
        "the seeded acceptance draws (about 4 % standard deviation at C=1 over 5 s, less at higher C).",
        "",
        "| C | baseline measured | baseline model | err | EAGLE-3 measured | EAGLE-3 model | err |",
        "|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for c, bm, bt, sm, st in rows:
        out.append(f"| {c} | {bm:.1f} | {bt:.1f} | {bm / bt - 1:+.1%} | {sm:.1f} | {st:.1f} | {sm / st - 1:+.1%} |")
    out += [
        "",
        "| 256 concurrent streams (plain decoding) | measured tok/s | model tok/s | timing error |",
        "|--|--:|--:|--:|",
    ]
    for speed, measured, target in big:
        out.append(f"| --sim-speed {speed:g} | {measured:.1f} | {target:.1f} | {measured / target - 1:+.2%} |")
    text = "\n".join(out) + "\n"
    print(text)
    if args.append:
        header = "" if RESULTS.exists() else "# Benchmark results\n\nAppend-only: each run adds a dated section.\n"
        with RESULTS.open("a") as f:
            f.write(header + "\n" + text)
    worst = max(abs(m / t - 1) for _, m, t in big)
    return 0 if worst < 0.02 else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
