"""Full simulated EAGLE-3 starts through `specdash`'s session, and the ETA error at each phase boundary.

Run (as root; about 2 x 9 minutes at time scale 1):
    .venv/bin/python benchmarks/startup_eta.py --time-scale 1 --runs 2

The first run has no history ("no history yet"); each later run is estimated from the ones before it.
For every phase boundary it prints when the phase began, the ETA shown at that moment, the real time left,
and the error. Results go to stdout; copy them into benchmarks/RESULTS.md with the date and machine.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._remote import bench_config, loopback_sshd, session_on  # noqa: E402
from specdash.bench.store import Store  # noqa: E402
from specdash.core.events import ServerStatus  # noqa: E402
from specdash.core.models import Phase  # noqa: E402

SETTLED = (Phase.READY, Phase.CRASHED, Phase.EXITED, Phase.STOPPED)


async def one_run(server, options, cfg, store, mode: str) -> list[tuple[Phase, float, float | None]]:  # type: ignore[no-untyped-def]
    """[(phase, seconds since launch when it began, ETA shown then)] and the ready time as the last entry."""
    boundaries: list[tuple[Phase, float, float | None]] = []
    t0 = time.time()

    def listen(event: object) -> None:
        if not isinstance(event, ServerStatus) or not (event.phase.is_startup or event.phase is Phase.READY):
            return
        if not boundaries or boundaries[-1][0] is not event.phase:
            boundaries.append((event.phase, time.time() - t0, event.eta_remaining))

    async with session_on(server, options, cfg, store, listen) as session:
        t0 = time.time()
        await session.start(mode)
        final = await session.wait_status(SETTLED, timeout=3600)
        if final.phase is not Phase.READY:
            raise SystemExit(f"start did not reach ready: {final}")
        await session.stop()
    return boundaries


def report(run: int, boundaries: list[tuple[Phase, float, float | None]]) -> None:
    ready_at = boundaries[-1][1]
    print(f"\nrun {run}: ready after {ready_at:.1f} s")
    print("| phase | began at (s) | ETA shown (s) | real time left (s) | error (s) | error (% of left) |")
    print("|---|---:|---:|---:|---:|---:|")
    for phase, at, eta in boundaries[:-1]:
        left = ready_at - at
        if eta is None:
            print(f"| {phase.value} | {at:.1f} | no history yet | {left:.1f} | | |")
        else:
            err = eta - left
            pct = f"{100 * err / left:+.1f}" if left > 0 else ""
            print(f"| {phase.value} | {at:.1f} | {eta:.1f} | {left:.1f} | {err:+.1f} | {pct} |")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--mode", default="eagle3")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, loopback_sshd() as (server, options):
        cfg, _ = bench_config(Path(tmp), args.time_scale)
        store = Store(Path(tmp) / "store.db")
        print(f"mode {args.mode}, simulator --tp 8, time scale {args.time_scale}")
        for run in range(1, args.runs + 1):
            report(run, await one_run(server, options, cfg, store, args.mode))


if __name__ == "__main__":
    asyncio.run(main())
