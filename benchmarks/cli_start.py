"""Measure how fast the `specdash` command line answers: median CPU time (user + sys) of N fresh processes.

Each command runs as `python -m specdash ...` in a fresh process with its own empty XDG directories (so `runs`
reads an empty store and nothing of the user's is touched), stdout and stderr to /dev/null; the CPU time is
the child's rusage. A bare interpreter (`python -c pass`) and `python -c 'import specdash'` are the reference.
CPU time, not wall time, so that other work on a shared machine changes the figures less.

Usage: `python benchmarks/cli_start.py [--runs 7] [--source DIR ...] [--append]`; with `--append` the table goes
to benchmarks/RESULTS.md (append-only). `--source DIR` (repeatable) measures the specdash package in DIR
instead of the installed one, in the same run (e.g. an older checkout from `git archive COMMIT specdash`): each
process then runs as `python -S` with `PYTHONPATH=DIR:<this interpreter's site-packages>`, so that no editable
install's import hook picks the package; the bare interpreter row is measured the same way.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).with_name("RESULTS.md")
SMALL_LOG = ROOT / "tests" / "fixtures" / "logs" / "sglang_11948_eagle3_decode.log"
TARGET_S = 0.15
"""What issue 30 point 7 asks of each specdash command below."""

CASES: tuple[tuple[str, list[str]], ...] = (
    ("bare interpreter (`python -c pass`)", ["-c", "pass"]),
    ("`import specdash`", ["-c", "import specdash"]),
    ("`specdash --version`", ["-m", "specdash", "--version"]),
    ("`specdash --help`", ["-m", "specdash", "--help"]),
    ("`specdash runs` (empty store)", ["-m", "specdash", "runs"]),
    ("`specdash config path`", ["-m", "specdash", "config", "path"]),
    (f"`specdash replay` ({SMALL_LOG.stat().st_size} B log)", ["-m", "specdash", "replay", str(SMALL_LOG)]),
    ("`specdash bench --help`", ["-m", "specdash", "bench", "--help"]),
)


def cpu_of(argv: list[str], env: dict[str, str], flags: tuple[str, ...] = ()) -> float:
    """The CPU seconds (user + sys) of one run of `python argv` (it must exit 0), run in the XDG home (`python -m`
    puts the working directory first on sys.path: never a source tree)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    home = str(Path(env["XDG_CACHE_HOME"]).parent)
    command = [sys.executable, *flags, *argv]
    proc = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=home)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{argv}: exit {proc.returncode}: {proc.stderr.decode(errors='replace')[-500:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="runs per command (default 7)")
    parser.add_argument("--append", action="store_true", help="append the table to benchmarks/RESULTS.md")
    parser.add_argument("--source", action="append", default=[], metavar="DIR", help="measure specdash from DIR")
    args = parser.parse_args()
    sources = [Path(d).resolve() for d in args.source] or [None]
    site = next(p for p in sys.path if p.endswith("site-packages"))
    tables = []
    with tempfile.TemporaryDirectory() as tmp:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "SPECDASH_", "PYTHONPATH"))}
        for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
            base[name] = str(Path(tmp) / name.lower())
        rows: dict[Path | None, list[tuple[str, float, float, float]]] = {s: [] for s in sources}
        for label, argv in CASES:
            for source in sources:  # interleaved: a change of load on the machine hits every source alike
                env, flags = dict(base), ()
                if source is not None:
                    env["PYTHONPATH"] = f"{source}:{site}"
                    flags = ("-S",)
                cpu_of(argv, env, flags)  # one unmeasured run: .pyc files written, the page cache warm
                times = [cpu_of(argv, env, flags) for _ in range(args.runs)]
                rows[source].append((label, statistics.median(times), min(times), max(times)))
        for source in sources:
            bare = rows[source][0][1]
            lines = [
                f"{'installed specdash' if source is None else source}:",
                "",
                "| command | median CPU s | min | max | x bare interpreter |",
                "|---|---:|---:|---:|---:|",
            ]
            for label, med, lo, hi in rows[source]:
                lines.append(f"| {label} | {med:.3f} | {lo:.3f} | {hi:.3f} | {med / bare:.1f} |")
            tables.append("\n".join(lines))
    table = "\n\n".join(tables)
    print(table)
    if args.append:
        stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        command = f"python benchmarks/cli_start.py {' '.join(sys.argv[1:])}"
        head = (
            f"\n## CLI start time ({stamp})\n\n`{command}`. Machine: {platform.machine()}, {os.cpu_count()} cores, "
            f"Linux {platform.release()}, "
            f"Python {platform.python_version()}; load average {load}. Median CPU time (user + sys) of "
            f"{args.runs} fresh processes each; target {TARGET_S} s.\n\n"
        )
        with RESULTS.open("a", encoding="utf-8") as f:
            f.write(head + table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
