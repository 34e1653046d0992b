"""A sweep as Markdown, ready to paste into a pull request (the dashboard's `y` copies it over OSC 52).

The verdict first (the same sentence as the dashboard and the report), then one row per concurrency level
with the modes side by side and each mode's speedup over the reference (the first mode), then the levels
that failed with their reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from specdash.core.events import LevelRow


def sweep_markdown(
    host: str, rows: Sequence[LevelRow], curves: Mapping[str, Sequence[tuple[int, float]]], verdict: str
) -> str:
    """`### specdash sweep on HOST`, the verdict, a table C x modes (tok/s, speedup), the failures."""
    modes = list(dict.fromkeys([*curves, *(row.mode for row in rows)]))
    by_mode = {mode: dict(curves.get(mode, ())) for mode in modes}
    levels = sorted({row.concurrency for row in rows})
    ref = by_mode[modes[0]] if modes else {}
    header = ["C", *(f"{m} tok/s" for m in modes), *(f"{m} speedup" for m in modes[1:])]
    lines = [f"### specdash sweep on {host}", ""]
    if verdict:
        lines += [f"**{verdict}**", ""]
    lines += ["| " + " | ".join(header) + " |", "|" + "---:|" * len(header)]
    failed = {(row.mode, row.concurrency): row for row in rows if row.status == "failed"}
    for c in levels:
        cells = [str(c)]
        for m in modes:
            v = by_mode[m].get(c)
            cells.append(f"{v:,.0f}" if v is not None else ("✗ failed" if (m, c) in failed else "–"))
        for m in modes[1:]:
            v, b = by_mode[m].get(c), ref.get(c)
            cells.append(f"{v / b:.2f}×" if v is not None and b and math.isfinite(v / b) else "–")
        lines.append("| " + " | ".join(cells) + " |")
    for (m, c), row in failed.items():
        lines.append(f"\n✗ {m} C={c}: {row.crash or row.warning or 'failed'}")
    return "\n".join(lines) + "\n"
