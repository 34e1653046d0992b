"""Dashboard responsiveness while the log streams at 10,000 lines/s (plus bench ticks at 4/s).

Setup: `SpecdashApp` headless (`run_test`, 160x45, live timers and 0.25 s chart throttle as in the CLI) over
the UI's in-memory test session. A feeder emits a `LogBatch` of `rate/4` lines and a `BenchTick` every 0.25 s,
as the real session batches them. Measured while it streams:
- loop lag: how late a 10 ms `asyncio.sleep` wakes up (anything the UI does blocks the loop for that long);
- key to frame: from posting a key event (as the terminal driver does) to the end of the first screen
  refresh after its handler ran, for `e` (errors-only: re-filters and redraws the log), `f` (follow) and
  `1`/`2` (mode list). `pilot.press` is not used: it waits for the whole process to go idle, which a
  streaming dashboard never does;
- ingest: time spent inside `LogView.append` per batch;
- CPU: process CPU time over wall time.

With `--sweep C`, a real C-stream sweep runs at the same time: `specdash sim` (baseline) on loopback and the
probe's worker processes compete with the app for the machine's cores, and the sweep's own progress ticks are
shown on the dashboard.

Usage: `.venv/bin/python benchmarks/ui_latency.py [--rate 10000] [--seconds 10] [--sweep 64]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path

from textual import events

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specdash.core.events import BenchTick  # noqa: E402
from specdash.core.startup_events import ClassifiedLine  # noqa: E402
from specdash.ui.app import make_app  # noqa: E402
from specdash.ui.widgets.logview import LogView  # noqa: E402
from specdash.ui.widgets.modes import ModeList  # noqa: E402
from tests.support import scenarios as sc  # noqa: E402
from tests.support.fake_session import FakeSession  # noqa: E402
from tests.support.log_batches import log_batch  # noqa: E402


def ne(read: Callable[[], object], before: object) -> bool:
    """True once `read()` no longer returns `before` (the key's handler has run)."""
    return read() != before


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def line(i: int) -> str:
    if i % 97 == 0:
        return f"\x1b[33m[2025-04-16 14:22:{i % 60:02d} TP{i % 8}] WARNING scheduler.py:1: queue is long ({i})\x1b[0m"
    return (
        f"[2025-04-16 14:22:{i % 60:02d} TP{i % 8}] Decode batch. #running-req: {i % 64}, #token: {i * 7}, "
        f"token usage: 0.{i % 100:02d}, gen throughput (token/s): 1714.22, #queue-req: 0"
    )


async def background_sweep(concurrency: int, seconds: float, emit: Callable[[BenchTick], None]) -> str:
    """A real sweep against the simulator for about `seconds`; returns its summary line."""
    from specdash.bench.probe import ProbeSettings
    from specdash.bench.prompts import load_prompts
    from specdash.bench.sweep import SweepConfig, run_sweep
    from specdash.ports import free_port
    from tests.support.sim_harness import SimProcess

    port = free_port()
    args = ["--model-path", "/models/kimi", "--tp", "2", "--port", str(port), "--sim-time-scale", "0.002"]
    async with SimProcess(args) as sim:
        await sim.wait_for("The server is fired up and ready to roll!", timeout=60)
        config = SweepConfig(
            levels=(concurrency,),
            duration_s=seconds,
            warmup_requests=0,
            progress_interval_s=0.25,
            settings=ProbeSettings(output_len=128),
        )
        result = await run_sweep(f"http://127.0.0.1:{port}", config, load_prompts("chat"), on_progress=emit)
    level = result.levels[0]
    return f"sweep C={concurrency}: {level.stats.output_tok_s:.0f} tok/s, {level.stats.completed} requests"


async def run(rate: int, seconds: float, sweep: int = 0) -> None:
    session = FakeSession(sc.ready_with_bench()[: -len(sc.TICKS)])
    app = make_app(session, live=True)
    per_batch = rate // 4
    # Classified as the session's tracker sends them (the tracker's cost is on the watcher's side, not here).
    batches = [log_batch(line(k * per_batch + i) for i in range(per_batch)) for k in range(8)]
    async with app.run_test(size=(160, 45), headless=True) as pilot:
        await pilot.pause()
        view = app.screen.query_one(LogView)
        ingest: list[float] = []
        original = view.append

        def timed_append(lines: Iterable[ClassifiedLine]) -> None:
            start = time.perf_counter()
            original(lines)
            ingest.append(time.perf_counter() - start)

        view.append = timed_append  # type: ignore[method-assign,assignment]
        stop = asyncio.Event()

        async def feed() -> None:
            k, t0 = 0, time.perf_counter()
            while not stop.is_set():
                session.emit(batches[k % len(batches)], BenchTick("eagle3", 20, k / 4, 1900.0 + k % 7 * 10, k % 64, 64))
                k += 1
                await asyncio.sleep(max(0.0, t0 + k * 0.25 - time.perf_counter()))

        async def lag_probe(lags: list[float]) -> None:
            while not stop.is_set():
                start = time.perf_counter()
                await asyncio.sleep(0.010)
                lags.append(time.perf_counter() - start - 0.010)

        modes = app.screen.query_one(ModeList)

        async def key_to_frame(key: str, changed: Callable[[], bool]) -> float:
            frame: asyncio.Future[float] = asyncio.get_running_loop().create_future()
            start = time.perf_counter()
            app.post_message(events.Key(key, key))
            while not changed():  # noqa: ASYNC110 - polling is the measurement: no event exists for "handled"
                await asyncio.sleep(0.0005)

            def painted() -> None:
                if not frame.done():
                    frame.set_result(time.perf_counter())

            app.call_after_refresh(painted)
            return await asyncio.wait_for(frame, 5) - start

        lags: list[float] = []
        keys: dict[str, list[float]] = {"e": [], "f": [], "1/2": []}
        bench = asyncio.create_task(background_sweep(sweep, seconds + 4, session.emit)) if sweep else None
        if bench is not None:
            await asyncio.sleep(4)  # let the simulator start and the sweep reach C streams
        cpu0, wall0 = time.process_time(), time.perf_counter()
        tasks = [asyncio.create_task(feed()), asyncio.create_task(lag_probe(lags))]
        end = wall0 + seconds
        while time.perf_counter() < end:
            errors, follow, highlighted = view.errors_only, view.follow, modes.highlighted
            keys["e"].append(await key_to_frame("e", partial(ne, lambda: view.errors_only, errors)))
            keys["f"].append(await key_to_frame("f", partial(ne, lambda: view.follow, follow)))
            target = "1" if highlighted else "2"
            keys["1/2"].append(await key_to_frame(target, partial(ne, lambda: modes.highlighted, highlighted)))
            await asyncio.sleep(0.2)
        stop.set()
        await asyncio.gather(*tasks)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        summary = await bench if bench is not None else ""

    print(f"ui_latency: {rate:,} lines/s for {wall:.1f} s, 160x45 headless, pid {os.getpid()}")
    print("| what | n | median ms | p95 ms | max ms |\n|---|---:|---:|---:|---:|")
    rows = [("loop lag (10 ms sleep)", lags), ("LogView.append per batch", ingest)]
    rows += [(f"key `{key}` to frame", values) for key, values in keys.items()]
    for name, values in rows:
        ms = [v * 1000 for v in values]
        print(f"| {name} | {len(ms)} | {statistics.median(ms):.1f} | {pct(ms, 0.95):.1f} | {max(ms):.1f} |")
    print(f"CPU: {cpu / wall * 100:.0f} % of one core over the run")
    if summary:
        print(summary)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=10_000, help="log lines per second")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--sweep", type=int, default=0, help="run a real sweep at this concurrency meanwhile")
    args = parser.parse_args()
    asyncio.run(run(args.rate, args.seconds, args.sweep))


if __name__ == "__main__":
    main()
