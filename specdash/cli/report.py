"""`specdash report RUN [RUN...] -o report.html [--png DIR]`: one self-contained HTML page of stored runs.

The first run is the reference mode. The page has the verdict, the tables, the tok/s-by-C, speedup, Pareto,
latency, acceptance (and with `--slo`, goodput) charts, and every run's provenance; it loads nothing from the
network. `--png DIR` also writes each chart as a PNG.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from specdash.cli._slo import add_slo_argument, slo_from
from specdash.errors import SpecdashError

NAME = "report"
HELP = "write stored runs as one self-contained HTML report (verdict, tables, charts, provenance)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the report flags."""
    parser.add_argument(
        "runs", nargs="+", type=int, metavar="RUN", help="run ids, reference first (see 'specdash runs')"
    )
    parser.add_argument(
        "-o", "--output", type=Path, default=Path("report.html"), help="HTML file (default %(default)s)"
    )
    parser.add_argument("--png", type=Path, metavar="DIR", help="also write each chart as DIR/NAME.png")
    add_slo_argument(parser)
    parser.add_argument("--tpot", choices=["p50", "p90"], default="p50", help="TPOT percentile of the Pareto x axis")
    parser.add_argument("--force", action="store_true", help="report runs whose workloads differ (marked as such)")
    parser.add_argument("--db", type=Path, help="store file (default: the data dir's specdash.db)")


def run(args: argparse.Namespace) -> int:
    """Write the report."""
    slo = slo_from(args.slo)
    from specdash.bench.run_data import check_workloads, load_runs
    from specdash.bench.store import Store
    from specdash.report.charts import to_png
    from specdash.report.html import build_report

    with Store(args.db) as store:
        runs = load_runs(store, args.runs, slo)
    forced = check_workloads(runs, args.force)
    report = build_report(runs, slo=slo, tpot_pct=args.tpot, forced=forced)
    try:
        args.output.write_text(report.html, encoding="utf-8")
        written = [str(args.output)]
        if args.png is not None:
            args.png.mkdir(parents=True, exist_ok=True)
            for name, fig in report.figures.items():
                path = args.png / f"{name}.png"
                path.write_bytes(to_png(fig))
                written.append(str(path))
    except OSError as exc:
        raise SpecdashError(f"cannot write the report: {exc}") from None
    print("wrote " + ", ".join(written))
    return 0
