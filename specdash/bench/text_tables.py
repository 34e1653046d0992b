"""Plain-text tables for the headless CLI: the live line, a sweep's final table, the comparison, the verdict."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from specdash.core.compare import Spread, compute_crossover
from specdash.core.events import BenchTick
from specdash.core.pareto import ParetoPoint, frontier
from specdash.core.verdict import crossover_sentence, verdict
from specdash.slo import Slo, goodput_curve, max_concurrency_meeting

if TYPE_CHECKING:
    from specdash.bench.sweep_data import SweepResult


def _f(v: Any, fmt: str = ".1f") -> str:
    return "-" if v is None else format(v, fmt)


def progress_line(tick: BenchTick) -> str:
    """One live line, e.g. `[eagle3 C=10] t=4.0s  1234.5 tok/s  37/50 done  0 failed  10 in flight`."""
    head = f"[{tick.mode} C={tick.concurrency}]"
    if tick.phase == "warmup":
        return f"{head} warming up ({tick.total} requests)"
    tot = "?" if tick.total is None else str(tick.total)
    return (
        f"{head} t={tick.t:.1f}s  {tick.tok_s:8.1f} tok/s  {tick.done}/{tot} done  "
        f"{tick.failed} failed  {tick.inflight} in flight"
    )


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], units: Sequence[str] | None = None) -> str:
    """Right-aligned columns; `units` is a second header row (`ms p50`, `tok/s`) under the names."""
    heads = [header, *([units] if units is not None else [])]
    widths = [max(*(len(h[i]) for h in heads), *(len(r[i]) for r in rows)) for i in range(len(header))]
    lines = ["  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True)).rstrip() for head in heads]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def _fit(
    columns: Sequence[tuple[str, str, int, Sequence[str]]], width: int | None
) -> tuple[list[tuple[str, str, int, Sequence[str]]], list[str]]:
    """The columns (name, unit, rank, cells) that fit `width`, dropping the highest rank first; and the names
    of those left out. Rank 0 columns always stay."""
    kept = list(columns)

    def total(cols: Sequence[tuple[str, str, int, Sequence[str]]]) -> int:
        return sum(max(len(n), len(u), *(len(c) for c in cells)) for n, u, _, cells in cols) + 2 * (len(cols) - 1)

    dropped: list[str] = []
    while width is not None and total(kept) > width:
        droppable = [c for c in kept if c[2] > 0]
        if not droppable:
            break
        worst = max(droppable, key=lambda c: c[2])
        kept.remove(worst)
        dropped.append(f"{worst[0]} {worst[1]}".strip())
    return kept, dropped


def level_table(
    results: Sequence[Mapping[str, Any]], reference: Mapping[int, float] | None = None, width: int | None = None
) -> str:
    """The final table of one sweep from `LevelResult.to_json()` dicts, warnings listed underneath.

    With `reference` (C -> the reference mode's tok/s) a speedup column; with SLO results, their columns.
    Each column has its unit under its name. With `width` (the terminal's columns) the least needed columns
    are left out until the table fits, and a line under it names them (`--json` has every figure).
    """
    with_slo = any(r.get("slo") for r in results)
    cells: dict[str, list[str]] = {}
    notes = []
    for r in results:
        st = r.get("stats") or {}
        sv = r.get("server") or {}
        slo = r.get("slo") or {}
        accept = sv.get("accept_length") or st.get("accept_length")
        tok_s = st.get("output_tok_s")
        ref = None if reference is None else reference.get(int(r.get("concurrency") or 0))
        row = {
            "C": str(r.get("concurrency")),
            "status": str(r.get("status")),
            "tok/s": _f(tok_s),
            "speedup": "-" if not ref or tok_s is None or r.get("status") != "done" else f"{tok_s / ref:.2f}x",
            "server": _f(sv.get("tok_s")),
            "req": _f((st.get("per_request_tok_s") or {}).get("p50")),
            "ttft50": _f((st.get("ttft_ms") or {}).get("p50")),
            "ttft99": _f((st.get("ttft_ms") or {}).get("p99")),
            "tpot": _f((st.get("tpot_ms") or {}).get("p50"), ".2f"),
            "itl": _f((st.get("itl_chunk_ms") or {}).get("p50"), ".2f"),
            "ok": str(st.get("completed", 0)),
            "failed": str(st.get("failed", 0)),
            "accept": _f(accept, ".2f"),
            "conc": _f(st.get("achieved_concurrency")),
            "slo": ("met" if slo.get("meets") else "missed") if slo else "-",
            "attain": _f(100 * slo["attainment"], ".0f") if slo else "-",
            "goodput": _f(slo.get("token_goodput")),
        }
        for key, value in row.items():
            cells.setdefault(key, []).append(value)
        for w in r.get("warnings") or ():
            notes.append(f"  C={r.get('concurrency')}: {w}")
        if st.get("failures"):
            notes.append(f"  C={r.get('concurrency')}: failures {st['failures']}")
        if r.get("abort_reason"):
            notes.append(f"  C={r.get('concurrency')}: stopped: {r['abort_reason']}")
    # (key, name, unit, rank): rank 0 always shows; higher ranks go first when the terminal is narrow.
    spec = [
        ("C", "C", "", 0),
        ("status", "status", "", 0),
        ("tok/s", "tok/s", "out", 0),
        *([("speedup", "speedup", "x ref", 1)] if reference is not None else []),
        ("server", "server", "tok/s", 7),
        ("req", "per req", "tok/s p50", 8),
        ("ttft50", "TTFT", "ms p50", 2),
        ("ttft99", "TTFT", "ms p99", 6),
        ("tpot", "TPOT", "ms p50", 3),
        ("itl", "ITL/chunk", "ms p50", 10),
        ("ok", "ok", "req", 5),
        ("failed", "failed", "req", 2),
        ("accept", "accept", "tok/step", 4),
        ("conc", "conc", "achieved", 9),
        *([("slo", "SLO", "", 1), ("attain", "attain", "%", 3), ("goodput", "goodput", "tok/s", 5)] * with_slo),
    ]
    kept, dropped = _fit([(name, unit, rank, cells.get(key, [])) for key, name, unit, rank in spec], width)
    rows = list(zip(*(c[3] for c in kept), strict=True)) if results else []
    out = _table([c[0] for c in kept], rows, [c[1] for c in kept])
    if dropped:
        said = f"(not shown, to fit {width} columns: {', '.join(dropped)}; --json has every column)"
        out += "\n" + textwrap.fill(said, width=width or 80, initial_indent="  ", subsequent_indent="   ")
    if notes:
        # Each note fits `width` too (a terminal's columns), its continuation indented under its text.
        fitted = [textwrap.fill(n, width=width, subsequent_indent="    ") if width else n for n in notes]
        out += "\n" + "\n".join(fitted)
    return out


def compare_table(
    names: Sequence[str], curves: Sequence[Mapping[int, float]], failures: Sequence[Mapping[int, str]] = ()
) -> str:
    """Per-level tok/s of each run, its speedup over the first (the reference) and the % delta, then the
    crossovers. `failures` (per run, C -> why) puts a failed level in the table as `✗ failed` (its reason is
    in `run_data.alarms`): a crash is never left out."""
    failed = list(failures) + [{}] * (len(curves) - len(failures))
    levels = sorted({c for curve in curves for c in curve} | {c for f in failed for c in f})

    def cell(v: float | None, c: int, i: int) -> str:
        return "✗ failed" if v is None and c in failed[i] else _f(v)

    header = ["C", names[0]]
    for n in names[1:]:
        header += [n, "speedup", "Δ %"]
    rows = []
    base = curves[0]
    for c in levels:
        row = [str(c), cell(base.get(c), c, 0)]
        for i, curve in enumerate(curves[1:], start=1):
            v = curve.get(c)
            b = base.get(c)
            row += [
                cell(v, c, i),
                "-" if v is None or not b else f"{v / b:.2f}x",
                "-" if v is None or not b else f"{(v / b - 1) * 100:+.1f}",
            ]
        rows.append(row)
    out = _table(header, rows)
    for n, curve in zip(names[1:], curves[1:], strict=True):
        out += "\n" + crossover_sentence(n, names[0], compute_crossover(base, curve))
    return out


def repeats_table(modes: Sequence[str], pooled: Sequence[Mapping[int, Spread]]) -> str:
    """Per level: each mode's median tok/s ± MAD over its runs (n), the ratio of medians to the first mode,
    then the crossover computed on the medians. A point whose MAD is over 5 % of its median is marked `~`."""
    levels = sorted({c for spreads in pooled for c in spreads})
    header = ["C", f"{modes[0]} (median ± MAD, n)"]
    for m in modes[1:]:
        header += [f"{m} (median ± MAD, n)", "ratio"]

    def cell(s: Spread | None) -> str:
        if s is None:
            return "-"
        return f"{s.median:.1f} ± {s.mad:.1f} ({s.n}){' ~' if s.noisy else ''}"

    rows = []
    base = pooled[0]
    for c in levels:
        row = [str(c), cell(base.get(c))]
        for spreads in pooled[1:]:
            v, b = spreads.get(c), base.get(c)
            row += [cell(v), "-" if v is None or b is None or not b.median else f"{v.median / b.median:.2f}x"]
        rows.append(row)
    out = _table(header, rows)
    if any(s.noisy for spreads in pooled for s in spreads.values()):
        out += "\n~ noisy: MAD over 5 % of the median; more repeats or a quieter machine"
    medians = [{c: s.median for c, s in spreads.items()} for spreads in pooled]
    for m, curve in zip(modes[1:], medians[1:], strict=True):
        out += "\n" + crossover_sentence(m, modes[0], compute_crossover(medians[0], curve))
    return out


def sweep_verdict(results: Mapping[str, SweepResult], slo: Slo | None = None) -> str:
    """`verdict: ...`: the answer of a headless sweep (modes in the order run, the first is the reference)."""
    curves = {m: r.curve() for m, r in results.items()}
    if slo is None:
        text = verdict(curves)
    else:
        judged = {
            m: [lv.slo for lv in r.levels if lv.slo is not None and lv.status == "done"] for m, r in results.items()
        }
        text = verdict(
            curves,
            slo_text=slo.text,
            capacity={m: max_concurrency_meeting(v) for m, v in judged.items()},
            goodput={m: goodput_curve(v) for m, v in judged.items()},
        )
    return f"verdict: {text or 'no level finished'}"


def pareto_table(points: Sequence[ParetoPoint], tpot_pct: str = "p50") -> str:
    """The Pareto view as text: every point (mode, C, tok/s per user, total, per GPU), frontier points starred."""
    front = {(p.mode, p.concurrency) for p in frontier(points)}
    header = ("mode", "C", f"tok/s/user ({tpot_pct})", "total tok/s", "per GPU", "frontier")
    rows = [
        (
            p.mode,
            str(p.concurrency),
            _f(p.per_user_tok_s),
            _f(p.total_tok_s),
            _f(p.per_gpu_tok_s),
            "*" if (p.mode, p.concurrency) in front else "",
        )
        for p in sorted(points, key=lambda p: (-p.per_user_tok_s, p.mode))
    ]
    return _table(header, rows)
