"""`specdash compare RUN [RUN...]`: tok/s per level side by side, speedup and % delta against the first run,
the verdict (crossover), the Pareto view, and with `--slo` attainment and goodput.

Runs whose workloads differ (prompt set, endpoint, output length, sampling) are refused; `--force` compares
them anyway and marks the output. When a mode appears in more than one run (repeats, e.g. from
`bench --repeats 3`), its runs are pooled: each level shows the median ± MAD over the runs, and the crossover
is computed on the medians.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from specdash.bench.run_data import alarms, check_workloads, load_runs, runs_verdict, series_names
from specdash.bench.text_tables import compare_table, level_table, pareto_table, repeats_table
from specdash.cli._slo import slo_from
from specdash.cli._store import reader_store
from specdash.cli._terminal import table_width
from specdash.core.compare import pool_runs


def run(args: argparse.Namespace) -> int:
    """Print the comparison."""

    slo = slo_from(args.slo)
    with reader_store(args) as store:
        runs = load_runs(store, args.runs, slo)
    forced = check_workloads(runs, args.force)
    for m in forced:
        print(f"NOT LIKE FOR LIKE (--force): {m}")
    names = [f"{r.mode}#{r.id}" for r in runs]
    modes = [r.mode for r in runs]
    curves = [r.curve() for r in runs]
    distinct = list(dict.fromkeys(modes))
    if len(distinct) < len(modes):
        pooled = [pool_runs([cv for m, cv in zip(modes, curves, strict=True) if m == mode]) for mode in distinct]
        print(repeats_table(distinct, pooled))
        return 0
    print(compare_table(names, curves, [r.failures() for r in runs]))
    print()
    print(f"verdict: {runs_verdict(runs, slo) or 'no level finished'}")
    for a in alarms(runs):
        print(f"warning: {a}")
    points = [replace(p, mode=n) for r, n in zip(runs, series_names(runs), strict=True) for p in r.pareto(args.tpot)]
    if points:
        print(f"\nPareto (tok/s per user = 1000 / TPOT {args.tpot}; * = on the frontier)")
        print(pareto_table(points, args.tpot))
    if slo is not None:
        for r, n in zip(runs, names, strict=True):
            print(f"\n{n} under {slo.text}")
            rows = [
                {"concurrency": lv.concurrency, "status": lv.status, "stats": dict(lv.stats),
                 "server": dict(lv.server), "slo": lv.slo.to_json() if lv.slo else None}
                for lv in r.levels
            ]  # fmt: skip
            print(level_table(rows, None if r is runs[0] else runs[0].curve(), width=table_width()))
    return 0
