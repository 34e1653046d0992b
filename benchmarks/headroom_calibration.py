"""Calibrate the client-limited rule (specdash/bench/headroom.py) against the simulator's ground truth.

Run: .venv/bin/python benchmarks/headroom_calibration.py [--levels 2,8,32] [--repeats 4] [--output-len 32]
     [--waves 5]

On a loaded 2-core box: the benchmark starts a bounded CPU hog pinned to CPU 0 (it ends by itself after
`--hog-s`, and is killed by PID at the end), and one `specdash sim` on loopback with `--sim-request-log`.
Then `run_sweep` (`--waves` x C requests per level, at least 10) runs under four conditions, `--repeats` times each:

- `clean`: the probe in a worker process, nothing else;
- `ui-blocked`: the probe in a worker, the sweep's own event loop (the UI's) frozen 30 ms every 50 ms;
- `probe-mild`: the probe in the sweep's loop (`processes=0`), frozen 3 ms every 50 ms;
- `probe-heavy`: the same, frozen 25 ms every 50 ms;
- `probe-starved`: frozen 45 ms every 50 ms: the client really holds load back and stamps late.

Truth per level: what the server did at C with a client that kept up. The simulator logs every request
(receipt, decode steps, finish); `tests.support.wan.truth_samples` + `summarize` turn a level's records into the
server's own tok/s by the same definitions; the reference for C is the median of that over the `clean`
levels. A level is "off" by |measured tok/s / reference - 1| (a held-back load lowers the server's own rate
too, which is why the reference is the clean server's, not this level's). The goal: no flag on a level
within 0.5 % of the truth, every level off by more than 2 % flagged.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specdash.bench.probe import ProbeSettings  # noqa: E402
from specdash.bench.prompts import load_prompts  # noqa: E402
from specdash.bench.store import Store  # noqa: E402
from specdash.bench.summary import summarize  # noqa: E402
from specdash.bench.sweep import SweepConfig, run_sweep  # noqa: E402
from specdash.core.events import BenchTick  # noqa: E402
from specdash.ports import free_port  # noqa: E402
from tests.support.wan import read_truth, truth_samples  # noqa: E402

CONDITIONS = {
    # name: (probe processes, freeze ms per 50 ms progress tick)
    "clean": (1, 0.0),
    "ui-blocked": (1, 30.0),
    "probe-mild": (0, 3.0),
    "probe-heavy": (0, 25.0),
    "probe-starved": (0, 45.0),
}

HOG = (
    "import os, time\nos.sched_setaffinity(0, {0})\nend = time.monotonic() + %f\nwhile time.monotonic() < end:\n pass\n"
)


def start_sim(port: int, log: Path, out: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "specdash", "sim", "--model-path", "/models/kimi", "--tp", "8", "--port", str(port)]
    argv += ["--sim-time-scale", "0.005", "--enable-metrics", "--sim-request-log", str(log)]
    with open(out, "wb") as sink:
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).status == 200:
                return proc
        except OSError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError("simulator not healthy after 60 s")


async def one_sweep(
    url: str, name: str, levels: tuple[int, ...], output_len: int, waves: int
) -> list[tuple[int, object, list]]:
    procs, freeze_ms = CONDITIONS[name]

    def freeze(p: BenchTick) -> None:
        if freeze_ms and p.phase == "running":
            end = time.perf_counter() + freeze_ms / 1000
            while time.perf_counter() < end:
                pass

    cfg = SweepConfig(
        mode=name,
        levels=levels,
        min_requests_factor=waves,
        processes=procs,
        progress_interval_s=0.05,
        settings=ProbeSettings(output_len=output_len),
    )
    store = Store(":memory:")
    res = await run_sweep(url, cfg, load_prompts("chat"), store, on_progress=freeze)
    assert res.run_id is not None
    return [(lv.concurrency, lv, store.samples(res.run_id, lv.level_id)) for lv in res.levels]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--levels", default="2,8,32")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--output-len", type=int, default=32)
    parser.add_argument("--waves", type=int, default=5, help="requests per level = waves x C (at least 10)")
    parser.add_argument("--hog-s", type=float, default=1200.0, help="the CPU hog's own time limit")
    args = parser.parse_args()
    levels = tuple(int(x) for x in args.levels.split(","))
    directory = Path(tempfile.mkdtemp(prefix="specdash-calib-"))
    log = directory / "requests.jsonl"
    port = free_port()
    began = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    hog = subprocess.Popen([sys.executable, "-c", HOG % args.hog_s])
    sim = start_sim(port, log, directory / "sim.log")
    rows = []
    try:
        for rep in range(args.repeats):
            for name in CONDITIONS:
                for c, lv, samples in asyncio.run(
                    one_sweep(f"http://127.0.0.1:{port}", name, levels, args.output_len, args.waves)
                ):
                    rows.append((rep, name, c, lv, samples))
                print(f"[{time.strftime('%H:%M:%S')}] repeat {rep} {name} done", file=sys.stderr, flush=True)
    finally:
        sim.kill()
        hog.kill()
        sim.wait()
        hog.wait()
    records = read_truth(log)
    server = {}
    for rep, name, c, _lv, samples in rows:
        server[(rep, name, c)] = summarize(truth_samples(records, samples), c).output_tok_s
    reference = {c: statistics.median(server[(r, "clean", c)] for r in range(args.repeats)) for c in levels}
    print(f"## Client-limited flags against the simulator's ground truth ({began})\n")
    print(
        f"`{' '.join(['benchmarks/headroom_calibration.py', *sys.argv[1:]])}`. Machine: {platform.node()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, Linux {platform.release()}; a CPU hog on "
        f"core 0 throughout; load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}.\n"
    )
    print("| repeat | condition | C | tok/s | server's own tok/s | reference | off | flagged | why / notes |")
    print("|--:|---|--:|--:|--:|--:|--:|---|---|")
    tallies = {"the clean server's rate at C (reference)": [], "this level's own server log": []}
    for rep, name, c, lv, _samples in rows:
        off = lv.stats.output_tok_s / reference[c] - 1
        own = lv.stats.output_tok_s / server[(rep, name, c)] - 1 if server[(rep, name, c)] else 0.0
        for key, value in zip(tallies, (off, own), strict=True):
            tallies[key].append((value, lv.client_limited))
        why = "; ".join(lv.client_limits) or "; ".join(w for w in lv.warnings if w.startswith("the UI lagged"))
        print(
            f"| {rep} | {name} | {c} | {lv.stats.output_tok_s:.1f} | {server[(rep, name, c)]:.1f} | "
            f"{reference[c]:.1f} | {off:+.2%} | {'yes' if lv.client_limited else 'no'} | {why} |"
        )
    print()
    print("| truth | levels | flagged | off by > 1 % | flagged within 0.5 % | off by > 2 %, not flagged |")
    print("|---|--:|--:|--:|--:|--:|")
    for key, pairs in tallies.items():
        print(
            f"| {key} | {len(pairs)} | {sum(f for _, f in pairs)} | {sum(abs(v) > 0.01 for v, _ in pairs)} | "
            f"{sum(f and abs(v) <= 0.005 for v, f in pairs)} | {sum((not f) and abs(v) > 0.02 for v, f in pairs)} |"
        )


if __name__ == "__main__":
    main()
