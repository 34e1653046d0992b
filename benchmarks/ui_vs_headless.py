"""Does the dashboard distort measurements? The same sweep, headless and under the running dashboard.

Run: .venv/bin/python benchmarks/ui_vs_headless.py [--levels 1,8,32] [--duration 6] [--rounds 2]

Both runs use the demo's stack (embedded SSH server, SSH port forward, the simulator in baseline mode, the
probe in its worker processes) and the same sweep settings; the second run happens while the Textual app runs
(headless driver, 160x45, every event rendered: log batches, charts at 4 Hz, the table). Rounds alternate
headless/dashboard to spread the machine's load over both. Prints tok/s per level and the difference.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics

from specdash.bench.probe import ProbeSettings
from specdash.bench.sweep import SweepConfig
from specdash.cli.demo_session import demo_session
from specdash.phases import Phase
from specdash.server.remote_session import RemoteSession, running
from specdash.ui.app import make_app


async def sweep(session: RemoteSession, levels: tuple[int, ...], duration: float) -> dict[int, float]:
    await session.start("baseline")
    await session.wait_status([Phase.READY], timeout=120)
    config = SweepConfig(duration_s=duration, progress_interval_s=0.25, settings=ProbeSettings(output_len=128))
    await session.sweep(["baseline"], levels, config=config)
    await session.stop()
    return session.results["baseline"].curve()


async def headless(levels: tuple[int, ...], duration: float) -> dict[int, float]:
    async with demo_session(0.01) as demo, running(demo.session) as session:
        return await sweep(session, levels, duration)


async def under_dashboard(levels: tuple[int, ...], duration: float) -> dict[int, float]:
    async with demo_session(0.01) as demo:
        app = make_app(demo.session)
        async with app.run_test(size=(160, 45)):
            await asyncio.wait_for(demo.session.attached.wait(), 30)
            return await sweep(demo.session, levels, duration)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--levels", default="1,8,32")
    parser.add_argument("--duration", type=float, default=6.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    levels = tuple(int(x) for x in args.levels.split(","))
    runs: dict[str, list[dict[int, float]]] = {"headless": [], "dashboard": []}
    for i in range(args.rounds):
        order = ("headless", "dashboard") if i % 2 == 0 else ("dashboard", "headless")
        for kind in order:
            fn = headless if kind == "headless" else under_dashboard
            runs[kind].append(await fn(levels, args.duration))
    print("| C | headless tok/s | under the dashboard tok/s | difference |")
    print("|--:|--:|--:|--:|")
    for c in levels:
        h = statistics.median(r[c] for r in runs["headless"] if c in r)
        d = statistics.median(r[c] for r in runs["dashboard"] if c in r)
        print(f"| {c} | {h:.1f} | {d:.1f} | {100 * (d / h - 1):+.2f} % |")


if __name__ == "__main__":
    asyncio.run(main())
