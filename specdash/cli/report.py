"""`specdash report RUN [RUN...] -o report.html [--png DIR]`: one self-contained HTML page of stored runs.

The first run is the reference mode. The page has the verdict, the tables, the tok/s-by-C, speedup, Pareto,
latency, acceptance (and with `--slo`, goodput) charts, and every run's provenance; it loads nothing from the
network. `--png DIR` also writes each chart as a PNG.
"""

from __future__ import annotations

import argparse

from specdash.bench.run_data import check_workloads, load_runs
from specdash.cli._files import write_file
from specdash.cli._slo import slo_from
from specdash.cli._store import reader_store
from specdash.errors import SpecdashError
from specdash.report.charts import to_png
from specdash.report.html import build_report


def run(args: argparse.Namespace) -> int:
    """Write the report."""
    slo = slo_from(args.slo)

    with reader_store(args) as store:
        runs = load_runs(store, args.runs, slo)
    forced = check_workloads(runs, args.force)
    report = build_report(runs, slo=slo, tpot_pct=args.tpot, forced=forced)
    write_file(args.output, report.html, "the report")
    written = [str(args.output)]
    if args.png is not None:
        try:
            args.png.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SpecdashError(f"cannot make the --png directory {args.png}: {exc.strerror or exc}") from None
        for name, fig in report.figures.items():
            path = args.png / f"{name}.png"
            write_file(path, to_png(fig), "a chart")
            written.append(str(path))
    print("wrote " + ", ".join(written))
    return 0
