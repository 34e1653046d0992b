"""`specdash export RUN --csv|--json`: a stored run as CSV (levels or requests) or bench_serving-like JSON."""

from __future__ import annotations

import argparse
import sys

from specdash.bench.export import export_csv, export_json
from specdash.cli._files import write_file
from specdash.cli._store import reader_store


def run(args: argparse.Namespace) -> int:
    """Write the export."""

    with reader_store(args) as store:
        text = export_json(store, args.run) if args.json else export_csv(store, args.run, samples=args.samples)
    if args.output is not None:
        write_file(args.output, text, "the export")
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0
