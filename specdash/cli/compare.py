"""`specdash compare RUN [RUN...]`: tok/s per level side by side, ratios to the first run, the crossover.

When a mode appears in more than one run (repeats, e.g. from `bench --repeats 3`), its runs are pooled: each
level shows the median ± MAD over the runs, and the crossover is computed on the medians.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from specdash.errors import UsageError

NAME = "compare"
HELP = "compare stored runs per concurrency level (the first run is the baseline) and find the crossover"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the compare flags."""
    parser.add_argument("runs", nargs="+", type=int, metavar="RUN", help="run ids (see 'specdash export')")
    parser.add_argument("--db", type=Path, help="store file (default: the data dir's specdash.db)")


def run(args: argparse.Namespace) -> int:
    """Print the comparison table."""
    from specdash.bench.report import compare_table, repeats_table
    from specdash.bench.store import Store
    from specdash.core.compare import pool_runs

    names: list[str] = []
    modes: list[str] = []
    curves: list[dict[int, float]] = []
    hashes: set[str] = set()
    with Store(args.db, create=False) as store:
        for run_id in args.runs:
            rec = store.run(run_id)
            if rec is None:
                raise UsageError(f"no run {run_id} in {store.path}")
            hashes.add(f"{rec.meta.prompt_hash}/{rec.meta.endpoint}/{rec.meta.output_len}")
            names.append(f"{rec.meta.mode}#{run_id}")
            modes.append(rec.meta.mode)
            curves.append(
                {
                    lv.concurrency: float(lv.result["stats"]["output_tok_s"])
                    for lv in store.levels(run_id)
                    if lv.status == "done" and lv.result.get("stats")
                }  # fmt: skip
            )
    distinct = list(dict.fromkeys(modes))
    if len(distinct) < len(modes):
        pooled = [pool_runs([cv for m, cv in zip(modes, curves, strict=True) if m == mode]) for mode in distinct]
        print(repeats_table(distinct, pooled))
    else:
        print(compare_table(names, curves))
    if len(hashes) > 1:
        print("warning: the runs used different prompt sets, endpoints or output lengths; ratios are not like for like")
    return 0
