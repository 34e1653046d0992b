"""Test files, slowest first: the order pytest-xdist hands them to its workers (`--dist loadfile`).

The workers take files in collection order (with `--no-loadscope-reorder`, in pyproject's addopts: by default
xdist puts the files with the most tests first), so a long file collected late runs alone at the end while the other
workers wait (the 163 s seed-figures file ended a 4-worker run three minutes after the others were done). The
seconds each file took are kept in `tests/durations.json`; collection sorts files by them, longest first (a
file not listed counts as the median). Refresh the table from a run's JUnit report:

    .venv/bin/python -m pytest -m "not engine and not exclusive_cpu" -n 6 --dist loadfile --junitxml=/tmp/junit.xml
    .venv/bin/python -m tests.support.durations /tmp/junit.xml
"""

from __future__ import annotations

import json
import statistics
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

TABLE = Path(__file__).resolve().parents[1] / "durations.json"


def load() -> dict[str, float]:
    try:
        data = json.loads(TABLE.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else {}


def order(paths: list[str], table: dict[str, float]) -> dict[str, int]:
    """Each path's rank, longest first; ties and unlisted files keep their collection order."""
    default = statistics.median(table.values()) if table else 0.0
    first = {p: i for i, p in enumerate(dict.fromkeys(paths))}
    ranked = sorted(first, key=lambda p: (-table.get(p, default), first[p]))
    return {p: i for i, p in enumerate(ranked)}


def from_junit(report: Path) -> dict[str, float]:
    """Seconds per test file (setup, call and teardown of its tests) from a JUnit XML report."""
    seconds: defaultdict[str, float] = defaultdict(float)
    for case in ET.parse(report).getroot().iter("testcase"):
        module = case.get("classname", "").split(".")
        parts = module[: next((i + 1 for i, m in enumerate(module) if m.startswith("test_")), len(module))]
        seconds["/".join(parts) + ".py"] += float(case.get("time", 0) or 0)
    return {k: round(v, 1) for k, v in sorted(seconds.items(), key=lambda kv: -kv[1])}


if __name__ == "__main__":
    TABLE.write_text(json.dumps(from_junit(Path(sys.argv[1])), indent=1) + "\n")
    print(f"wrote {TABLE}")
