"""How many log lines per CPU-second the startup tracker handles (the dashboard needs 10,000 lines/s).

Run: .venv/bin/python benchmarks/tracker_throughput.py [--tracemalloc]
CPU time (process_time), not wall time: what "eating a core" means, and steadier on a busy machine.
`--tracemalloc` measures the same under `tracemalloc`, which the log flood test once used to measure memory
(why it no longer does: `tests/support/peak_rss.py`).
"""

from __future__ import annotations

import statistics
import sys
import time
import tracemalloc

from specdash.core.startup import StartupTracker

LINES = [
    "[2025-12-20 10:02:00 TP0] Decode batch, #running-req: 4, #token: 2048, token usage: 0.00, accept len: 3.10, "
    "accept rate: 0.78, cuda graph: True, gen throughput (token/s): 512.34, #queue-req: 0, ",
    '[2025-12-20 10:02:00] INFO:     127.0.0.1:50002 - "POST /generate HTTP/1.1" 200 OK',
    "[2025-12-20 10:02:00 TP3] Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, "
    "#running-req: 0, #queue-req: 0, ",
    "Capturing batches (bs=40 avail_mem=29.34 GB):  10%|█         | 1/10 [00:11<01:47, 11.99s/it]",
    "some unrelated noise line without any keyword at all, as long as a typical line",
]


def main() -> None:
    text = "\n".join(LINES * 20_000) + "\n"
    count = text.count("\n")
    traced = "--tracemalloc" in sys.argv[1:]
    if traced:
        tracemalloc.start()
    rates = []
    for _ in range(5):
        tracker = StartupTracker("sglang")
        start = time.process_time()
        tracker.feed(text, now=1.0)
        rates.append(count / (time.process_time() - start))
    median = statistics.median(rates)
    if traced:
        tracemalloc.stop()
    label = "under tracemalloc: " if traced else ""
    print(f"{label}lines: {count}, runs: 5, median {median:,.0f} lines per CPU-second, min {min(rates):,.0f}")
    print(f"10,000 lines/s costs {10_000 / median:.0%} of one core")


if __name__ == "__main__":
    main()
