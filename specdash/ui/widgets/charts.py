"""Bench charts through textual-plotext: each widget owns its figure (`self.plt`), never global plotext.

Data arrives ~4 times a second; a chart redraws at most once per `interval` and not while it is hidden
(it catches up when shown). With `interval=0` (tests, snapshots) it redraws at once, so no timer runs.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from collections.abc import Mapping
from typing import Any

from rich.text import Text
from textual import on
from textual.app import RenderResult
from textual.color import Color
from textual.events import Show
from textual.timer import Timer
from textual_plotext import PlotextPlot

from specdash.core.events import BenchTick, LevelRow
from specdash.core.pareto import frontier, points_for, staircase
from specdash.core.verdict import speedups
from specdash.ui.messages import BenchTicked

LIVE_LEVELS = 4
"""Levels kept on the live chart (older ones are in the table)."""

LIVE_POINTS = 600
"""Points kept per level (150 s at 4 ticks a second)."""


def nice_ticks(top: float, count: int = 4) -> tuple[list[float], list[str]]:
    """Y ticks from 0 to a round number at or above `top` (tok/s axes start at 0, so bars never exaggerate).

    Never a single tick: plotext divides by the axis span, so an all-zero series needs 0..1.
    """
    if top <= 0:
        return [0.0, 1.0], ["0", "1"]
    raw = top / count
    magnitude = 10 ** len(str(int(raw))) / 10 if raw >= 1 else 1.0
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    ticks = [step * i for i in range(math.ceil(top / step) + 1)]
    return ticks, [f"{t / 1000:g}k" if t >= 1000 else f"{t:g}" for t in ticks]


def y_axis(plt: Any, top: float, height: int) -> None:
    """Apply `nice_ticks` and pin the axis to start at 0, with no more ticks than the plot has rows for.

    `height` is the widget's content height. Below it plotext keeps three rows for the x axis, its ticks and
    its label; two ticks on one row would overwrite each other's label (which one shows varied from one
    process to the next), so a squeezed chart gets fewer, wider steps.
    """
    rows = max(1, height - 3)
    for count in (4, 3, 2, 1):
        ticks, labels = nice_ticks(top, count=count)
        limit = ticks[-1]
        if rows * (ticks[1] - ticks[0]) / limit >= 2:  # two rows or more between neighbouring labels
            break
        if len(ticks) > 2 and limit > 1.25 * top:  # squeezed: the axis may end above the last label
            ticks, labels, limit = ticks[:-1], labels[:-1], top * 1.05
            if rows * (ticks[1] - ticks[0]) / limit >= 2:
                break
    plt.ylim(0, limit)
    plt.yticks(ticks, labels)


SERIES_COLOURS = ("primary", "warning", "success", "error", "accent", "secondary", "foreground")
"""Theme variables the chart lines take their colours from, in order (one line per level or mode). The
hues that differ most come first: "secondary" is a darker "primary" in the stock themes, and a fourth live
level drawn in it looked like the first (seen against vLLM: ngram C=4 beside plain C=1)."""


def theme_rgb(variables: Mapping[str, str], names: tuple[str, ...]) -> list[tuple[int, int, int]]:
    """The distinct RGBs of the named theme variables that parse (plotext takes RGB tuples as colours).

    A theme that gives two variables the same colour yields it once, so two lines never share a colour while
    another is left.
    """
    out: list[tuple[int, int, int]] = []
    for name in names:
        try:
            colour = Color.parse(variables[name])
        except (KeyError, ValueError):
            continue
        rgb = (colour.r, colour.g, colour.b)
        if rgb not in out:
            out.append(rgb)
    return out


def log_x(values: list[float]) -> tuple[list[float], list[float], list[str]]:
    """Concurrency levels on a log axis: (log10 of each value, tick positions, tick labels).

    plotext's own log scale labels powers of ten only; the measured levels are the ticks that matter.
    """
    levels = sorted(set(values))
    return [math.log10(v) for v in values], [math.log10(v) for v in levels], [f"{v:g}" for v in levels]


def x_span(plt: Any, xs: list[float], pad: float) -> None:
    """Widen a zero-width x range (one point, one level): plotext divides by the span."""
    if xs and min(xs) == max(xs):
        plt.xlim(min(xs) - pad, max(xs) + pad)


class ThrottledPlot(PlotextPlot):
    """A plot that coalesces redraw requests to at most one per `interval` seconds."""

    def __init__(self, *, interval: float = 0.25, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self._interval = interval
        self._dirty = False
        self._timer: Timer | None = None
        self._version = 0
        self._cached: tuple[tuple[object, ...], RenderResult] | None = None

    def render(self) -> RenderResult:
        # Building a plotext figure costs ~30 ms; the screen re-renders every widget on any layout change
        # (a label update), so rebuild only when the data, the size or the theme changed.
        # Plotting happens here, not when data arrives, so it knows the widget's real size.
        key = (self._version, self.size, self.app.theme)
        if self._cached is None or self._cached[0] != key:
            try:
                self.draw()
                result = super().render()
            except Exception as exc:  # noqa: BLE001 - a plotting bug must not take the dashboard down mid-demo
                self.log.error("chart failed", exc)
                result = Text(f"chart unavailable ({type(exc).__name__}); the table has the figures")
            self._cached = (key, result)
        return self._cached[1]

    def request_redraw(self) -> None:
        """Ask for a redraw soon; many requests inside one interval make one redraw."""
        self._dirty = True
        if self._interval <= 0:
            self._flush()
        elif self._timer is None:
            self._timer = self.set_timer(self._interval, self._flush)

    def _flush(self) -> None:
        self._timer = None
        if not self._dirty or not self.display or not self.is_mounted:
            return  # hidden: `on_show` catches up
        self._dirty = False
        self._version += 1
        self.refresh()

    def on_show(self, _event: Show) -> None:
        if self._dirty:
            self._flush()

    def draw(self) -> None:
        """Re-plot from the widget's data into `self.plt` (subclasses; called from `render`)."""

    def colours(self) -> list[tuple[int, int, int]]:
        """Line colours from the current theme (the render cache is keyed on the theme)."""
        return theme_rgb(self.app.theme_variables, SERIES_COLOURS) or [(128, 128, 128)]


class LiveChart(ThrottledPlot):
    """Aggregate tok/s over the last second while levels run, one line per level (the newest few)."""

    def __init__(self, *, interval: float = 0.25, id: str | None = None) -> None:  # noqa: A002
        super().__init__(interval=interval, id=id)
        self._series: OrderedDict[tuple[str, int], deque[tuple[float, float]]] = OrderedDict()
        self._slot: dict[tuple[str, int], int] = {}
        """Colour slot per level: a level keeps its colour, and the LIVE_LEVELS shown never share one."""
        self.border_title = "live tok/s"

    def clear(self) -> None:
        """Forget every level (a new sweep starts)."""
        self._series.clear()
        self._slot.clear()
        self.border_title, self.border_subtitle = "live tok/s", ""
        self.request_redraw()

    @on(BenchTicked)
    def _ticked(self, message: BenchTicked) -> None:
        self.add(message.tick)

    def add(self, tick: BenchTick) -> None:
        """Add one point."""
        key = (tick.mode, tick.concurrency)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = deque(maxlen=LIVE_POINTS)
            while len(self._series) > LIVE_LEVELS:
                old, _ = self._series.popitem(last=False)
                self._slot.pop(old, None)
            used = set(self._slot.values())
            self._slot[key] = next(i for i in range(LIVE_LEVELS + 1) if i not in used)
        series.append((tick.t, tick.tok_s))
        self.border_title = f"live tok/s · {tick.mode} C={tick.concurrency}"
        # A time-bounded level has no request total: say how long it has run instead of "48/0".
        if tick.total:
            self.border_subtitle = f"{tick.done}/{tick.total} requests"
        else:
            self.border_subtitle = f"{tick.done} requests done · {tick.t:.0f} s"
        self.request_redraw()

    def draw(self) -> None:
        plt = self.plt
        plt.clear_figure()
        several_modes = len({mode for mode, _ in self._series}) > 1
        top = 0.0
        colours = self.colours()
        for i, ((mode, concurrency), points) in enumerate(self._series.items()):
            # At most two points per braille column: more only costs build time.
            stride = max(1, len(points) // max(1, 2 * self.size.width))
            snapshot = list(points)[::stride]
            label = f"{mode} C={concurrency}" if several_modes else f"C={concurrency}"
            colour = colours[self._slot.get((mode, concurrency), i) % len(colours)]
            plt.plot([t for t, _ in snapshot], [v for _, v in snapshot], marker="braille", label=label, color=colour)
            top = max([top, *(v for _, v in snapshot)])
        y_axis(plt, top, self.content_size.height)
        x_span(plt, [t for points in self._series.values() for t, _ in points], 0.5)
        plt.xlabel("s into level")


CHART_VIEWS = ("tok/s by concurrency", "speedup", "Pareto")
"""What the curves chart can show (`p` cycles through them)."""


class CurvesChart(ThrottledPlot):
    """Finished levels, one line per mode: tok/s against C (log x, crossover marked), the speedup against the
    first mode with the 1.0 line, or the Pareto view (total tok/s against tok/s per user, frontier as steps)."""

    def __init__(self, *, interval: float = 0.25, id: str | None = None) -> None:  # noqa: A002
        super().__init__(interval=interval, id=id)
        self._curves: Mapping[str, tuple[tuple[int, float], ...]] = {}
        self._rows: tuple[LevelRow, ...] = ()
        self._crossover: float | None = None
        self.view = 0
        """Index into `CHART_VIEWS`."""
        self.border_title = CHART_VIEWS[0]

    def set_curves(
        self,
        curves: Mapping[str, tuple[tuple[int, float], ...]],
        crossover: float | None,
        rows: tuple[LevelRow, ...] = (),
    ) -> None:
        """Replace the curves (they come whole with every bench update); `rows` give the Pareto view its TPOT."""
        self._curves, self._crossover, self._rows = dict(curves), crossover, rows
        self.request_redraw()

    def cycle_view(self) -> str:
        """Show the next view; returns its name."""
        self.view = (self.view + 1) % len(CHART_VIEWS)
        self.border_title = f"{CHART_VIEWS[self.view]} (p: next view)"
        self._version += 1
        self.refresh()
        return CHART_VIEWS[self.view]

    def draw(self) -> None:
        plt = self.plt
        plt.clear_figure()
        if self.view == 1:
            self._draw_speedup(plt)
        elif self.view == 2:
            self._draw_pareto(plt)
        else:
            self._draw_tok_s(plt)

    def _marked_line(self, plt: Any, xs: list[float], ys: list[float], label: str, colour: Any) -> None:
        """A line with a marker at each measured point (the line alone would hide where the levels are)."""
        plt.plot(xs, ys, marker="braille", label=label, color=colour)
        plt.scatter(xs, ys, marker="●", color=colour)

    def _draw_tok_s(self, plt: Any) -> None:
        levels = sorted({c for points in self._curves.values() for c, _ in points})
        colours = self.colours()
        for i, (mode, points) in enumerate(self._curves.items()):
            ordered = sorted(points)
            if ordered:
                xs, _, _ = log_x([float(c) for c, _ in ordered])
                self._marked_line(plt, xs, [v for _, v in ordered], mode, colours[i % len(colours)])
        if levels:
            _, ticks, labels = log_x([float(c) for c in levels])
            plt.xticks(ticks, labels)
            x_span(plt, ticks, 0.1)
            plt.xlabel("C (log)")
        top = max((v for points in self._curves.values() for _, v in points), default=0.0)
        y_axis(plt, top, self.content_size.height)
        if self._crossover is not None and levels:
            # A vertical line where speculation stops paying; the sentence is in the verdict line.
            marker = theme_rgb(self.app.theme_variables, ("error",))
            plt.vline(math.log10(self._crossover), color=marker[0] if marker else None)

    def _draw_speedup(self, plt: Any) -> None:
        modes = list(self._curves)
        colours = self.colours()
        if len(modes) < 2:
            plt.title("speedup needs two modes (A/B)")
            return
        ref = dict(self._curves[modes[0]])
        every: list[float] = []
        levels: set[int] = set()
        for i, mode in enumerate(modes[1:], start=1):
            ratios = speedups(ref, dict(self._curves[mode]))
            if ratios:
                xs, _, _ = log_x([float(c) for c in ratios])
                self._marked_line(plt, xs, list(ratios.values()), f"{mode}/{modes[0]}", colours[i % len(colours)])
                every += ratios.values()
                levels |= set(ratios)
        if levels:
            _, ticks, labels = log_x([float(c) for c in levels])
            plt.xticks(ticks, labels)
            x_span(plt, ticks, 0.1)
            plt.hline(1.0, color=colours[0])  # 1.0: as fast as the reference
            lo, hi = min([1.0, *every]), max([1.0, *every])
            plt.ylim(max(0.0, lo - 0.1), hi + 0.1)
            plt.xlabel("C (log)")

    def _draw_pareto(self, plt: Any) -> None:
        colours = self.colours()
        points = []
        for mode in self._curves:
            rows = [
                (r.concurrency, r.tok_s or 0.0, r.tpot_p50_ms)
                for r in self._rows
                if r.mode == mode and r.status == "done" and r.tok_s
            ]
            points += points_for(mode, rows)
        if not points:
            plt.title("no finished level with a TPOT yet")
            return
        for i, mode in enumerate(self._curves):
            pts = [p for p in points if p.mode == mode]
            if pts:
                self._marked_line(
                    plt, [p.per_user_tok_s for p in pts], [p.total_tok_s for p in pts], mode, colours[i % len(colours)]
                )
                for p in pts:
                    plt.text(f"C={p.concurrency}", p.per_user_tok_s, p.total_tok_s, color=colours[i % len(colours)])
        corners = staircase(frontier(points))
        plt.plot([x for x, _ in corners], [y for _, y in corners], marker="dot", label="frontier")
        y_axis(plt, max(p.total_tok_s for p in points), self.content_size.height)
        plt.xlim(0, max(p.per_user_tok_s for p in points) * 1.15)
        plt.xlabel("tok/s per user (1000/TPOT p50)")
