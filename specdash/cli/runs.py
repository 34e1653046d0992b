"""`specdash runs`: the stored runs, newest first (id, date, host, mode, levels, status, verdict).

Runs of one A/B sweep share a sweep id; their verdict (the crossover) is shown on each of them. A run
alone gets its own peak. Filters narrow the list; `--json` prints it for scripts.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path
from typing import Any

from specdash.bench.run_data import load_run, runs_verdict
from specdash.bench.store import Store, demo_path
from specdash.errors import UsageError


def run(args: argparse.Namespace) -> int:
    """Print the list."""

    if args.since is not None:
        try:
            dt.date.fromisoformat(args.since)
        except ValueError:
            raise UsageError(f"--since: expected a date YYYY-MM-DD, got {args.since!r}") from None
    path = demo_path() if args.demo else args.db
    if path is not None and not Path(path).exists():
        raise UsageError(f"no store at {path}")
    with Store(path) as store:
        records = [
            r
            for r in store.runs()
            if (args.host is None or r.meta.host == args.host)
            and (args.mode is None or r.meta.mode == args.mode)
            and (args.since is None or r.created[:10] >= args.since)
            and (args.status is None or r.status == args.status)
        ][: args.limit]
        data = {r.id: load_run(store, r.id) for r in records}
        # The verdict of a sweep (all its modes, in the order they ran) is shown on each of its runs.
        groups: dict[str, list[int]] = {}
        for rec in store.runs():
            sid = (rec.meta.provenance or {}).get("sweep_id")
            if sid:
                groups.setdefault(str(sid), []).append(rec.id)
        verdicts: dict[int, str] = {}
        for rec in records:
            sid = (rec.meta.provenance or {}).get("sweep_id")
            ids = sorted(groups.get(str(sid), [rec.id])) if sid else [rec.id]
            runs = [data[i] if i in data else load_run(store, i) for i in ids]
            verdicts[rec.id] = runs_verdict(runs)
    rows: list[dict[str, Any]] = []
    for rec in records:
        d = data[rec.id]
        rows.append(
            {
                "id": rec.id,
                "created": rec.created,
                "host": rec.meta.host,
                "mode": rec.meta.mode,
                "engine": rec.meta.engine,
                "levels": [lv.concurrency for lv in d.levels if lv.status == "done"],
                "status": rec.status,
                "sweep_id": (rec.meta.provenance or {}).get("sweep_id"),
                "verdict": verdicts[rec.id],
            }
        )
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    if not rows:
        print("no runs" + (" match" if any((args.host, args.mode, args.since, args.status)) else " stored yet"))
        return 0
    for row in rows:
        levels = ",".join(str(c) for c in row["levels"]) or "-"
        when = str(row["created"]).replace("T", " ")[:16]
        print(f"{row['id']:>5}  {when}  {row['host']}  {row['mode']}  C={levels}  {row['status']}")
        if row["verdict"]:
            print(f"       {row['verdict']}")
    return 0
