"""The report's charts, drawn with matplotlib (Agg, no display) and returned as SVG text or PNG bytes.

SVG text is drawn as paths (`svg.fonttype = "path"`), so an inlined chart needs no font and no network.
Every chart takes plain series (`Series`) so it can be tested without a store.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import matplotlib

matplotlib.use("Agg")  # before pyplot: never a display, never a GUI toolkit

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FixedLocator, NullLocator  # noqa: E402

from specdash.core.pareto import ParetoPoint, frontier, staircase  # noqa: E402

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
"""One distinct colour per mode (matplotlib's tab10 without grey and olive, which read poorly on white)."""

plt.rcParams.update({"svg.fonttype": "path", "font.size": 9, "axes.grid": True, "grid.alpha": 0.3})


@dataclass(frozen=True)
class Series:
    """One mode's figures per level."""

    name: str
    """The legend label."""
    points: Mapping[int, float]
    """C -> value."""
    extra: Mapping[str, Mapping[int, float | None]] = field(default_factory=dict)
    """Other per-level values by name (`ttft_p50`, `tpot_p90`, `accept`, ...)."""


def colour(i: int) -> str:
    """The i-th series colour."""
    return PALETTE[i % len(PALETTE)]


def _log_c_axis(ax: Axes, levels: Sequence[int]) -> None:
    """A log concurrency axis labelled at exactly the measured levels."""
    ax.set_xscale("log")
    if levels:
        ax.xaxis.set_major_locator(FixedLocator([float(c) for c in levels]))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels([str(c) for c in levels])
        lo, hi = min(levels), max(levels)
        ax.set_xlim(lo / 1.3, hi * 1.3)
    ax.set_xlabel("concurrency C (log scale)")


def _levels(series: Sequence[Series]) -> list[int]:
    return sorted({c for s in series for c in s.points})


def _new(width: float = 6.4, height: float = 3.6) -> tuple[Figure, Axes]:
    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, fig.add_subplot()


def _note(ax: Axes, text: str, xy: tuple[float, float], offset: tuple[float, float], **style: Any) -> None:
    """A small label `offset` points away from the data point `xy`."""
    ax.annotate(text, xy, xytext=offset, textcoords="offset points", **style)


def tok_s_chart(series: Sequence[Series], crossover: float | None = None) -> Figure:
    """Aggregate output tok/s against C (log x), a marker at each measured level, the crossover marked."""
    fig, ax = _new()
    for i, s in enumerate(series):
        cs = sorted(s.points)
        ax.plot(cs, [s.points[c] for c in cs], marker="o", color=colour(i), label=s.name)
    if crossover is not None:
        ax.axvline(crossover, color="#d62728", linestyle="--", linewidth=1)
        _note(ax, f"crossover C≈{crossover:.1f}", (crossover, 0), (4, 4), color="#d62728", fontsize=8)
    _log_c_axis(ax, _levels(series))
    ax.set_ylim(bottom=0)
    ax.set_ylabel("output tok/s (steady state)")
    ax.set_title("Throughput by concurrency")
    ax.legend()
    return fig


def speedup_chart(reference: str, series: Sequence[Series]) -> Figure:
    """Each mode's tok/s / the reference's per level, with the 1.0 line (above it, speculation pays)."""
    fig, ax = _new()
    levels = _levels(series)
    ax.axhline(1.0, color="#333333", linewidth=1)
    _note(ax, f"= {reference}", (levels[0] if levels else 1, 1.0), (2, 3), fontsize=8)
    top = 1.0
    for i, s in enumerate(series, start=1):
        cs = sorted(s.points)
        ys = [s.points[c] for c in cs]
        top = max([top, *ys])
        ax.plot(cs, ys, marker="o", color=colour(i), label=f"{s.name} / {reference}")
        for c, y in zip(cs, ys, strict=True):
            ax.annotate(f"{y:.2f}x", (c, y), xytext=(0, 5), textcoords="offset points", ha="center", fontsize=7)
    _log_c_axis(ax, levels)
    low = min([1.0, *(v for s in series for v in s.points.values())])
    ax.set_ylim(max(0.0, low - 0.15), top + 0.15)
    ax.set_ylabel("speedup (x)")
    ax.set_title(f"Speedup against {reference}")
    if series:
        ax.legend()
    return fig


def pareto_chart(points: Sequence[ParetoPoint], *, per_gpu: bool = False, tpot_label: str = "p50") -> Figure:
    """Total (or per-GPU) tok/s against tok/s per user, a curve per mode labelled with C, the frontier as steps."""
    fig, ax = _new(6.4, 4.0)
    modes = list(dict.fromkeys(p.mode for p in points))
    for i, mode in enumerate(modes):
        pts = sorted((p for p in points if p.mode == mode), key=lambda p: p.concurrency)
        ys = [p.per_gpu_tok_s if per_gpu else p.total_tok_s for p in pts]
        ax.plot([p.per_user_tok_s for p in pts], ys, marker="o", color=colour(i), label=mode)
        for p, y in zip(pts, ys, strict=True):
            _note(ax, f"C={p.concurrency}", (p.per_user_tok_s, y), (4, 3), fontsize=7, color=colour(i))
    front = frontier(points, per_gpu=per_gpu)
    corners = staircase(front, per_gpu=per_gpu)
    if corners:
        ax.plot(
            [x for x, _ in corners],
            [y for _, y in corners],
            color="#222222",
            linestyle=":",
            linewidth=1.2,
            label="Pareto frontier",
        )
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_xlabel(f"tok/s per user (1000 / TPOT {tpot_label})")
    ax.set_ylabel("output tok/s per GPU" if per_gpu else "total output tok/s")
    ax.set_title("Throughput against interactivity" + (" (per GPU)" if per_gpu else ""))
    if modes:
        ax.legend()
    return fig


def latency_chart(series: Sequence[Series]) -> Figure:
    """TTFT and TPOT (p50 solid, p90 dashed) against C, one colour per mode."""
    fig = Figure(figsize=(6.4, 3.4), layout="constrained")
    axes = fig.subplots(1, 2)
    levels = _levels(series)
    for ax, metric, unit in ((axes[0], "ttft", "TTFT (ms)"), (axes[1], "tpot", "TPOT (ms)")):
        for i, s in enumerate(series):
            for pct, style in (("p50", "-"), ("p90", "--")):
                values = s.extra.get(f"{metric}_{pct}", {})
                cs = [c for c in sorted(values) if values[c] is not None]
                if cs:
                    ax.plot(
                        cs,
                        [values[c] for c in cs],
                        marker="o",
                        markersize=3,
                        linestyle=style,
                        color=colour(i),
                        label=f"{s.name} {pct}",
                    )
        _log_c_axis(ax, levels)
        ax.set_ylim(bottom=0)
        ax.set_ylabel(unit)
    axes[0].set_title("Time to first token")
    axes[1].set_title("Time per output token")
    axes[1].legend(fontsize=7)
    return fig


def acceptance_chart(series: Sequence[Series]) -> Figure:
    """Mean acceptance length against C for each speculative mode, with the 1.0 line (no draft accepted)."""
    fig, ax = _new(6.4, 3.0)
    levels = _levels(series)
    ax.axhline(1.0, color="#d62728", linewidth=1, linestyle="--")
    _note(ax, "1.0: drafts never accepted", (levels[0] if levels else 1, 1.0), (2, 3), fontsize=7, color="#d62728")
    top = 1.0
    for i, s in enumerate(series):
        values = s.extra.get("accept", {})
        cs = [c for c in sorted(values) if values[c] is not None]
        if cs:
            ys = [float(values[c] or 0) for c in cs]
            top = max([top, *ys])
            ax.plot(cs, ys, marker="o", color=colour(i), label=s.name)
    _log_c_axis(ax, levels)
    ax.set_ylim(0, math.ceil(top + 0.5))
    ax.set_ylabel("mean accept length (tokens/step)")
    ax.set_title("Speculative acceptance")
    ax.legend()
    return fig


def goodput_chart(series: Sequence[Series], slo_text: str) -> Figure:
    """Token goodput against C (bars: attainment % on the right axis is in the table)."""
    fig, ax = _new(6.4, 3.2)
    for i, s in enumerate(series):
        cs = sorted(s.points)
        ax.plot(cs, [s.points[c] for c in cs], marker="o", color=colour(i), label=s.name)
    _log_c_axis(ax, _levels(series))
    ax.set_ylim(bottom=0)
    ax.set_ylabel("token goodput (tok/s within SLO)")
    ax.set_title(f"Goodput under {slo_text}")
    ax.legend()
    return fig


def to_svg(fig: Figure) -> str:
    """The figure as an `<svg>` element (no XML prolog, so it can sit inside HTML)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    text = buf.getvalue()
    return text[text.index("<svg") :]


def to_png(fig: Figure, dpi: int = 120) -> bytes:
    """The figure as PNG bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()
