"""A tune's result as plain data, its policy table rows and its speedup-vs-C chart (text).

Shared by `specdash tune` (its output and `--json`) and the dashboard's Tune view, which reads the newest
journal (`load_latest`). No Textual here. `policy_line` is the one sentence saying where speculation stops
paying (or that nothing speculative was measured yet: the policy says nothing before that).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import plotext as plt

from specdash.core import tune as core
from specdash.tune.journal import Journal, TuneState
from specdash.tune.plan import TunePlan
from specdash.tune.runner import TuneResult, result_of


def report(plan: TunePlan, result: TuneResult) -> dict[str, Any]:
    """The tune's result as plain data (the `--json` output, the Tune view's input)."""
    pts = result.points
    return {
        "name": plan.name,
        "host": plan.host,
        "mode": plan.base_mode,
        "baseline": plan.baseline_mode,
        "levels": list(plan.levels),
        "settings": [s.label for s in plan.order],
        "skipped": [{"setting": s.setting.label, "reason": s.reason} for s in plan.skipped],
        "measured": {
            name: {
                str(c): {"median": round(p.median, 2), "spread": round(p.spread, 2), "se": round(p.se, 3), "n": p.n}
                for c, p in lv.items()
            }
            for name, lv in pts.items()
        },
        "crashes": list(result.state.crashes.values()),
        "dropped": list(result.dropped),
        "rule": "drop a setting once, at every level it measured, best.median - x.median > best.spread + x.spread "
        f"(spread = max(MAD, {plan.noise_floor:g} x median)); in passes 2..R a contended level (a candidate within "
        f"{core.Z:g} standard errors of the best) is measured in more blocks on the same restart until its standard "
        f"error is <= {plan.precision:g} x median or {plan.max_blocks} blocks",
        "restarts": result.restarts,
        "full_grid_restarts": plan.full_grid_restarts,
        "restarts_saved": result.restarts_saved,
        "jobs": list(result.state.jobs),
        "speculative_measured": result.speculative_measured,
        "policy": result.policy.to_json(),
        "baseline_label": core.BASELINE,
        "aborted": result.aborted,
    }


def load_report(path: Path) -> dict[str, Any] | None:
    """The report of the tune journaled at `path` (None if it has no header), from its records alone."""
    header, records = Journal(path).read()
    if header is None:
        return None
    state = TuneState()
    for record in records:
        state.apply(record)
    plan = TunePlan(
        name=str(header.get("name", path.stem)),
        host=str(header.get("host", "")),
        base_mode=str(header.get("base_mode", "")),
        baseline_mode=str(header.get("baseline_mode", "")),
        engine="",
        space=str(header.get("space", "")),
        levels=tuple(int(c) for c in header.get("levels", [])),
        repeats=int(header.get("repeats", 1)),
        order=(),  # the labels are the header's (below); the dropped ones are among the measured
        skipped=(),
        noise_floor=float(header.get("noise_floor", core.NOISE_FLOOR)),
        precision=float(header.get("precision", core.PRECISION)),
        max_blocks=int(header.get("max_blocks", core.MAX_BLOCKS)),
    )
    labels = [str(x) for x in header.get("settings", [])] or [
        name for name in state.measured() if name != core.BASELINE
    ]
    out = report(plan, result_of(plan, state))
    out["settings"] = labels
    out["full_grid_restarts"] = (len(labels) + 1) * plan.repeats
    out["verify"] = state.verify
    return out


def load_latest(directory: Path) -> dict[str, Any] | None:
    """The report of the most recently written journal in `directory` (None when there is none)."""
    try:
        paths = sorted(directory.glob("*.jsonl"), key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return None
    for path in paths:
        out = load_report(path)
        if out is not None:
            return out
    return None


def policy_rows(out: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(C range, setting or "no speculation", speedup, spread) per policy range, as text."""
    rows = []
    for r in out["policy"]["ranges"]:
        span = f"{r['low']}-{r['high']}" if r["high"] is not None else f"{r['low']}+"
        choice = "no speculation" if r["choice"] == core.BASELINE else r["choice"]
        rows.append((span, choice, f"{r['speedup']:.3f}x", f"± {r['spread']:.3f}"))
    return rows


def policy_line(out: Mapping[str, Any]) -> str:
    """Where speculation stops paying, in one sentence; before any speculative level is measured it says so
    instead of a verdict."""
    measured = out.get("measured", {})
    if not any(name != out.get("baseline_label", core.BASELINE) and levels for name, levels in measured.items()):
        return "no speculative setting measured yet: no verdict on speculation"
    threshold = out["policy"]["disable_above"]
    if threshold:
        return f"speculation stops paying above C = {threshold}"
    paying = [r["low"] for r in out["policy"]["ranges"] if r["choice"] != core.BASELINE]
    return f"speculation pays only from C = {paying[0]} up" if paying else "speculation never pays"


def speedup_chart(out: dict[str, Any], width: int = 72, height: int = 14) -> str:
    """Speedup over the baseline vs C (log x) of the policy's choice per level, with the 1.0 line."""
    per_level = out["policy"]["per_level"]
    if not per_level:
        return "(no data)"
    levels = sorted(int(c) for c in per_level)
    measured = out["measured"]
    base = measured.get(out["baseline_label"], {})
    best = []
    for c in levels:
        values = [
            lv[str(c)]["median"] for name, lv in measured.items() if name != out["baseline_label"] and str(c) in lv
        ]
        b = base.get(str(c), {}).get("median")
        best.append(max(values) / b if values and b else 1.0)
    plt.clear_figure()
    plt.theme("clear")
    plt.plotsize(width, height)
    plt.xscale("log")
    plt.plot(levels, best, marker="dot", label="best setting / baseline")
    plt.hline(1.0)
    plt.xticks(levels, [str(c) for c in levels])
    plt.title("speedup vs C")
    plt.xlabel("C")
    return re.sub(r"\x1b\[[0-9;]*m", "", str(plt.build()))  # plotext colours even the clear theme
