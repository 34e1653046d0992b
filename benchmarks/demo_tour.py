"""How long `make demo`'s tour takes: `specdash demo --autoplay` in a real terminal (tmux), as a user sees it.

Run: .venv/bin/python benchmarks/demo_tour.py [--runs 2] [--size 160x45]

Starts the installed CLI in a detached tmux session and polls the screen (every 50 ms) for the tour's
milestones: the dashboard drawn, each mode ready, and the `sweep done` notification with the crossover. The
time counts from launching the command, so Python's start-up and the embedded SSH server are included.
Then `q` quits and the demo must be gone. Prints one line per run and the screen at the end of the tour.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.support.tmux import TmuxSession  # noqa: E402

SPECDASH = str(Path(sys.executable).with_name("specdash"))
TIMEOUT_S = 240.0
"""Give up on a tour after this long (the bound on the run)."""


def one(width: int, height: int) -> tuple[dict[str, float], str]:
    t0 = time.monotonic()
    tmux = TmuxSession([SPECDASH, "demo", "--autoplay"], width=width, height=height)
    marks: dict[str, float] = {}
    wanted = {"drawn": "specdash", "tour": "Autoplay", "done": "sweep done"}
    last = ""
    try:
        deadline = t0 + TIMEOUT_S
        while "done" not in marks and time.monotonic() < deadline:
            last = tmux.screen()
            now = time.monotonic() - t0
            for name, text in wanted.items():
                if name not in marks and text in last:
                    marks[name] = now
            time.sleep(0.05)
        final = last
        tmux.send("q")
        tmux.wait_gone(30)
    finally:
        tmux.kill()
    return marks, final


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--size", default="160x45")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    totals = []
    final = ""
    for run in range(1, args.runs + 1):
        marks, final = one(width, height)
        line = ", ".join(f"{k} {v:.1f} s" for k, v in marks.items())
        print(f"run {run}: {line}", flush=True)
        if "done" in marks:
            totals.append(marks["done"])
    if totals:
        print(f"tour to 'sweep done': median {statistics.median(totals):.1f} s over {len(totals)} run(s)")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("screen at the end of the last tour:")
    print(final)


if __name__ == "__main__":
    main()
