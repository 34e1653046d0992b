"""`specdash export RUN --csv|--json`: a stored run as CSV (levels or requests) or bench_serving-like JSON."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

NAME = "export"
HELP = "export a stored bench run as CSV or JSON (sglang.bench_serving field names where they overlap)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the export flags."""
    parser.add_argument("run", type=int, metavar="RUN", help="run id")
    fmt = parser.add_mutually_exclusive_group(required=True)
    fmt.add_argument("--csv", action="store_true", help="CSV, one row per level")
    fmt.add_argument("--json", action="store_true", help="JSON, one object per level")
    parser.add_argument("--samples", action="store_true", help="CSV: one row per request instead")
    parser.add_argument("-o", "--output", type=Path, help="write to this file instead of stdout")
    parser.add_argument("--db", type=Path, help="store file (default: the data dir's specdash.db)")


def run(args: argparse.Namespace) -> int:
    """Write the export."""
    from specdash.bench.export import export_csv, export_json
    from specdash.bench.store import Store

    with Store(args.db, create=False) as store:
        text = export_json(store, args.run) if args.json else export_csv(store, args.run, samples=args.samples)
    if args.output is not None:
        args.output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0
