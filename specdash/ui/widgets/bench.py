"""The bench area: the level table (client and server figures side by side, speedup against the first mode;
where the crossover strip stands for the charts, one row per concurrency with the modes side by side), the
lines under it (verdict, greedy check, acceptance, warnings: wrapped, in a block of capped height that
scrolls, with a hint when some are out of view), and the two charts."""

from __future__ import annotations

from collections.abc import Mapping

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.reactive import reactive
from textual.widgets import DataTable, Label

from specdash.core.acceptance import accept_alarm, acceptance_line
from specdash.core.events import BenchUpdate, GreedyUpdate, LevelRow
from specdash.core.verdict import speedup_strip
from specdash.ui.format import rate
from specdash.ui.messages import BenchTicked
from specdash.ui.widgets.charts import CurvesChart, LiveChart

COLUMNS = ("", "mode", "C", "tok/s", "×", "server", "accept", "TTFT", "ok")
CHARTS_MIN_ROWS = 8
"""On a sweep page (the panel stacked: table, lines, charts), the rows the charts keep: fewer show nothing."""
TABLE_MAX_ROWS = 8
"""The stacked table's height at most (`app.tcss`), reserved for it when capping the lines under it."""
STRIP_TABLE_MAX_ROWS = 12
"""The same where the crossover strip stands for the charts (a short terminal): the table gets their room."""
SLO_COLUMNS = ("SLO", "goodput")
"""Added when the sweep has an SLO: the level's attainment (✓ it meets the SLO, ✗ not) and token goodput."""

STATUS_GLYPH = {"pending": "·", "warmup": "…", "running": "▶", "paused": "‖", "done": "✓", "failed": "✗"}
"""One cell for the level's state (the table is narrow at 120 columns): ▶ running, ✓ done, ✗ failed."""


def row_cells(row: LevelRow, reference: Mapping[int, float] | None = None) -> tuple[str, ...]:
    """One level as table cells: the client's tok/s, its speedup over `reference` (C -> the first mode's
    tok/s; blank for the first mode itself), the server's tok/s, acceptance length, TTFT, requests."""
    ttft = "-" if row.ttft_p50_ms is None else f"{row.ttft_p50_ms:,.0f}ms"
    accept = "-" if row.accept_length is None else f"{row.accept_length:.2f}"
    ok = str(row.ok) if not row.failed else f"{row.ok}/{row.failed}✗"
    ref = (reference or {}).get(row.concurrency)
    speedup = f"{row.tok_s / ref:.2f}×" if ref and row.tok_s is not None and row.status == "done" else ""
    return (
        STATUS_GLYPH.get(row.status, "?"),
        row.mode,
        str(row.concurrency),
        rate(row.tok_s),
        speedup,
        rate(row.server_tok_s),
        accept,
        ttft,
        ok,
    )


LEVEL_CELL = {"pending": "·", "warmup": "…", "paused": "‖"}
"""A mode's tok/s cell in the by-level table while its level has no figure yet."""


def level_columns(modes: list[str], slo: bool = False) -> tuple[str, ...]:
    """The by-level table's headers: C, each mode's tok/s (the reference first), then each other mode's
    speedup over the reference and its acceptance length (named by mode when there are more than two); with
    an SLO, one column with each mode's attainment (`✓100% / ✗62%`, in the order of the tok/s columns)."""
    others = modes[1:]
    speed = ["×"] if len(others) == 1 else [f"× {m}" for m in others]
    accept = ["accept"] if len(others) == 1 else [f"accept {m}" for m in others]
    return ("", "C", *(f"{m} tok/s" for m in modes), *speed, *accept, *(["SLO " + "/".join(modes)] if slo else []))


def level_glyph(rows: list[LevelRow]) -> str:
    """One level's state over its modes: running (or warming up, paused) if one is, ✗ if one failed, ✓ when
    all are done, else pending."""
    for row in rows:
        if row.status in ("warmup", "running", "paused"):
            return STATUS_GLYPH[row.status]
    if any(row.status == "failed" for row in rows):
        return STATUS_GLYPH["failed"]
    done = rows and all(row.status == "done" for row in rows)
    return STATUS_GLYPH["done"] if done else STATUS_GLYPH["pending"]


def level_cells(
    c: int, modes: list[str], by_mode: Mapping[tuple[str, int], LevelRow], slo: bool = False
) -> tuple[str, ...]:
    """One concurrency level with the modes side by side: each mode's tok/s (· pending, ✗ failed), each other
    mode's speedup over the reference (the first; finished levels only) and its acceptance length."""
    here = [row for m in modes if (row := by_mode.get((m, c))) is not None]

    def tok_s(row: LevelRow | None) -> str:
        if row is None:
            return ""
        if row.status == "failed":
            return "✗ crashed" if row.crash else "✗ failed"
        if row.tok_s is None:
            return LEVEL_CELL.get(row.status, "…")
        return rate(row.tok_s)

    ref = by_mode.get((modes[0], c))
    speed: list[str] = []
    accept: list[str] = []
    for mode in modes[1:]:
        row = by_mode.get((mode, c))
        ratio = ""
        if row is not None and ref is not None and row.status == ref.status == "done" and row.tok_s and ref.tok_s:
            ratio = f"{row.tok_s / ref.tok_s:.2f}×"
        speed.append(ratio)
        accept.append("-" if row is None or row.accept_length is None else f"{row.accept_length:.2f}")
    cells = (level_glyph(here), str(c), *(tok_s(by_mode.get((m, c))) for m in modes), *speed, *accept)
    if not slo:
        return cells
    marks = [slo_cells(row)[0] if (row := by_mode.get((m, c))) is not None else "" for m in modes]
    return (*cells, " / ".join(mark or "-" for mark in marks))


def slo_cells(row: LevelRow) -> tuple[str, str]:
    """`✓ 96%` (meets the SLO; share of requests within every limit) and the token goodput, or blanks."""
    if row.slo is None or row.status not in ("done", "failed"):
        return ("", "")
    mark = "✓" if row.slo.meets else "✗"
    return (f"{mark}{row.slo.attainment:.0%}", rate(row.slo.token_goodput))


def acceptance_text(rows: tuple[LevelRow, ...]) -> str:
    """The newest finished speculative level's acceptance (the table's `accept` column says it per level)."""
    done = [row for row in rows if row.status == "done" and row.accept_length is not None]
    if not done:
        return ""
    row = done[-1]
    assert row.accept_length is not None
    return acceptance_line(row.mode, row.concurrency, row.accept_length, row.draft_share, row.accept_per_position)


def greedy_text(update: GreedyUpdate) -> str:
    """The greedy check's line(s): running, `k/N identical` with the first difference, or why there is no
    comparison yet."""
    if update.running:
        return f"… greedy check: {update.mode}, {update.prompts} prompts at temperature 0"
    check = update.check
    if check is None:
        return f"greedy check: {update.note}"
    mark = "✓" if check.identical == check.total else "⚠"
    return f"{mark} {check.text}" + (f"\n  ({update.note})" if update.note else "")


def notes_text(rows: tuple[LevelRow, ...]) -> str:
    """The levels' warnings, one line each (under the table, where they are never cut off), and the alarm for
    a mode whose drafts are almost never accepted (`core.acceptance`)."""
    lines = [f"✗ {row.mode} crashed at C={row.concurrency}: {row.crash}" for row in rows if row.crash]
    lines += [f"⚠ {row.mode} C={row.concurrency}: {row.warning}" for row in rows if row.warning]
    for mode in dict.fromkeys(row.mode for row in rows):
        alarm = accept_alarm(mode, [r.accept_length for r in rows if r.mode == mode and r.status == "done"])
        if alarm is not None:
            lines.append(f"⚠ {alarm}")
    return "\n".join(lines)


class BenchTable(DataTable[str]):
    """Levels of the current sweep, in order: one row per (mode, C), or, `by_level`, one row per C with the
    modes side by side (where the crossover strip stands for the charts: `BenchPanel` sets it)."""

    _columns: tuple[str, ...] = COLUMNS
    """The headers shown now (they change with the layout, the modes and the SLO)."""
    by_level = False
    """One row per concurrency with the modes side by side (a sweep of two modes or more)."""
    _shown: tuple[tuple[LevelRow, ...], Mapping[str, tuple[tuple[int, float], ...]] | None] = ((), None)
    """What the table shows, to redraw it in the other layout."""

    def on_mount(self) -> None:
        self.border_title = "Sweep"
        self.cursor_type = "row"
        self.zebra_stripes = True
        self.add_columns(*COLUMNS)

    def set_by_level(self, by_level: bool) -> None:
        """Switch the layout (the terminal got shorter or taller); redraws what is shown."""
        if by_level != self.by_level:
            self.by_level = by_level
            self.show_rows(*self._shown)

    def on_show(self) -> None:
        # Rows that came while the sweep page was hidden moved the cursor without scrolling (a hidden table
        # has no height): the running level comes into view with the page.
        self.move_cursor(row=self.cursor_row, animate=False)

    def show_rows(
        self, rows: tuple[LevelRow, ...], curves: Mapping[str, tuple[tuple[int, float], ...]] | None = None
    ) -> None:
        """Replace every row (a sweep has tens of levels at most, so redrawing all is cheap), then bring the
        running level into view."""
        self._shown = (rows, curves)
        modes = list(dict.fromkeys([*(curves or {}), *(row.mode for row in rows)]))
        # The reference is the first of the curves (the session puts the mode the A/B chose first) once two
        # modes have finished levels; until then the modes in the order measured.
        if len(curves or {}) < 2:
            modes = list(dict.fromkeys(row.mode for row in rows))
        if self.by_level and len(modes) >= 2:
            running = self._show_levels(rows, modes)
        else:
            running = self._show_modes(rows, modes if len(curves or {}) >= 2 else [])
        if running is not None:
            self.move_cursor(row=running, animate=False)
            # Rows just added have no height until the next refresh: scroll once they do.
            self.call_after_refresh(self.move_cursor, row=running, animate=False)

    def _set_columns(self, columns: tuple[str, ...]) -> None:
        self.clear(columns=columns != self._columns)
        if columns != self._columns:
            self._columns = columns
            self.add_columns(*columns)

    def _show_modes(self, rows: tuple[LevelRow, ...], modes: list[str]) -> int | None:
        slo = any(row.slo is not None for row in rows)
        # Two columns more only when the sweep has an SLO: the table stays readable at 80 columns.
        self._set_columns((*COLUMNS, *(SLO_COLUMNS if slo else ())))
        by_mode = {(row.mode, row.concurrency): row.tok_s for row in rows if row.status == "done"}
        for row in rows:
            ref = None
            if modes and row.mode != modes[0]:
                ref = {c: v for (m, c), v in by_mode.items() if m == modes[0] and v is not None}
            cells = row_cells(row, ref) + (slo_cells(row) if slo else ())
            self.add_row(*cells, key=f"{row.mode}@{row.concurrency}")
        running = [i for i, row in enumerate(rows) if row.status in ("warmup", "running", "paused")]
        return running[-1] if running else None

    def _show_levels(self, rows: tuple[LevelRow, ...], modes: list[str]) -> int | None:
        slo = any(row.slo is not None for row in rows)
        self._set_columns(level_columns(modes, slo))
        by_mode = {(row.mode, row.concurrency): row for row in rows}
        levels = sorted({row.concurrency for row in rows})
        running = None
        for i, c in enumerate(levels):
            cells = level_cells(c, modes, by_mode, slo)
            if cells[0] in (STATUS_GLYPH[s] for s in ("warmup", "running", "paused")):
                running = i
            self.add_row(*cells, key=str(c))
        return running


class BenchLines(VerticalScroll):
    """The lines under the table. Its height is capped (`app.tcss`: fewer rows on a short terminal), so that
    many warnings cannot push the charts off the sweep page; what does not fit scrolls (tab focuses the
    block, j/k/g/G scroll it), and `hint`, a line under the block, says how many lines are out of view."""

    ALLOW_MAXIMIZE = True
    """`z` here zooms the bench panel, as it does from the table."""

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self.hint = Label("", id="bench-lines-more", markup=False)
        """The line under the block (shown only when some lines are out of view)."""

    def on_resize(self) -> None:
        # Sent when the block's size or its content's height changes (new lines, a new width, a new cap).
        self.update_hint()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self.update_hint()

    def update_hint(self) -> None:
        """Say how many lines are above and below the view, or hide the hint when every line is in view."""
        above = round(self.scroll_y)
        below = max(0, self.virtual_size.height - self.scrollable_content_region.height - above)
        self.hint.display = bool(above or below)
        keys = "j/k" if self.has_focus else "tab to here, then j/k"
        if below:
            self.hint.update(f"▼ {below} more line{'s' if below != 1 else ''} ({keys})")
        elif above:
            self.hint.update(f"▲ {above} line{'s' if above != 1 else ''} above ({keys})")

    def on_focus(self) -> None:
        self.update_hint()

    def on_blur(self) -> None:
        self.update_hint()


class BenchPanel(Horizontal):
    """Table, live chart and curves; a one-line hint until the first sweep. `z` on the table zooms all three."""

    ALLOW_MAXIMIZE = True

    has_data: reactive[bool] = reactive(False)
    """True once a sweep has reported anything (the panel grows from a hint to its full height)."""

    def __init__(self, *, chart_interval: float = 0.25, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self._interval = chart_interval
        self._table_state = ""
        self.live_chart = LiveChart(interval=chart_interval, id="live-chart")
        """The live chart (made here: the app posts throughput ticks to it from the start)."""
        self.in_flight_at_loss: dict[tuple[str, int], int] = {}
        """(mode, C) -> the requests in flight when the level's first request lost its connection (a crash card
        says how many ran when the server died)."""

    def compose(self) -> ComposeResult:
        yield Label("No sweep yet.  b: sweep the live mode   space: mark modes, a: A/B", id="bench-hint")
        with Vertical(id="bench-left"):
            yield BenchTable(id="bench-table")
            # The charts' message in one line, where the terminal is too short to read them (`app.tcss`).
            yield Label("", id="bench-strip", markup=False)
            with BenchLines(id="bench-lines") as lines:
                yield Label("", id="bench-crash", markup=False)
                yield Label("", id="bench-verdict", markup=False)
                yield Label("", id="bench-greedy", markup=False)
                yield Label("", id="bench-accept", markup=False)
                yield Label("", id="bench-notes", markup=False)
            yield lines.hint
        with Horizontal(id="bench-charts"):
            yield self.live_chart
            yield CurvesChart(interval=self._interval, id="curves-chart")

    def watch_has_data(self, has_data: bool) -> None:
        self.set_class(not has_data, "-empty")

    def on_resize(self) -> None:
        # Stacked (a sweep page), the lines under the table get what the table, the hint and the charts'
        # minimum leave: 4 rows at 80x24, 10 at 80x30 (the rest scrolls). Side by side, the CSS cap applies.
        self.query_one(BenchTable).set_by_level(not self.charts_shown)
        lines = self.query_one(BenchLines)
        if self.styles.layout is not None and self.styles.layout.name == "vertical":
            charts = CHARTS_MIN_ROWS if self.charts_shown else 1  # else the one-line strip stands for them
            table = TABLE_MAX_ROWS if self.charts_shown else STRIP_TABLE_MAX_ROWS
            lines.styles.max_height = max(1, self.content_size.height - table - 1 - charts)
        else:
            lines.styles.max_height = None

    @property
    def charts_shown(self) -> bool:
        """False where the terminal is too short to read a chart: the crossover strip says what they would."""
        return bool(self.query_one("#bench-charts").styles.display != "none")

    def show_update(self, update: BenchUpdate) -> None:
        """A level started or ended: new table, new curves."""
        self.has_data = True
        curves = {mode: dict(points) for mode, points in update.curves.items()}
        self.query_one("#bench-strip", Label).update(speedup_strip(curves, update.crossover))
        table = self.query_one(BenchTable)
        table.by_level = not self.charts_shown
        table.show_rows(update.rows, update.curves)
        self.query_one(CurvesChart).set_curves(update.curves, update.crossover, update.rows)
        verdict = self.query_one("#bench-verdict", Label)
        verdict.update(f"▶ {update.crossover_text}" if update.crossover_text else "")
        verdict.display = bool(update.crossover_text)
        done = sum(1 for row in update.rows if row.status in ("done", "failed"))
        # A sweep that ended with levels still pending was cut short (cancelled or failed): say so.
        crashed = next((row for row in update.rows if row.crash), None)
        if crashed is not None:  # not "finished": the crash and where it happened stand on the table
            state = f"crashed at {crashed.mode} C={crashed.concurrency}"
        else:
            state = "running" if update.running else "finished" if done == len(update.rows) else "stopped"
        self._table_state = f"{state} · {done}/{len(update.rows)} levels"
        self.query_one(BenchTable).border_subtitle = self._table_state
        accept = self.query_one("#bench-accept", Label)
        accept.update(acceptance_text(update.rows))
        accept.display = bool(acceptance_text(update.rows))
        notes = self.query_one("#bench-notes", Label)
        notes.update(notes_text(update.rows))
        notes.display = bool(notes_text(update.rows))

    def show_crash_card(self, text: str) -> None:
        """The crash card first under the table (`core.status_text.crash_card`), or none."""
        card = self.query_one("#bench-crash", Label)
        card.update(text)
        card.display = bool(text)

    def show_countdown(self, text: str) -> None:
        """The running sweep's expected time left (`core.eta.countdown_text`) on the table's title; "" when
        none runs."""
        self.query_one(BenchTable).border_title = f"Sweep · {text}" if text else "Sweep"

    def show_greedy(self, update: GreedyUpdate) -> None:
        """The greedy check's state under the verdict; a difference is a finding (warning colour)."""
        self.has_data = True
        label = self.query_one("#bench-greedy", Label)
        label.update(greedy_text(update))
        label.display = True
        check = update.check
        label.set_class(check is not None and check.identical < check.total, "-finding")

    @on(BenchTicked)
    def _ticked(self, message: BenchTicked) -> None:
        # The live chart has drawn the point (the message bubbled up from it).
        self.has_data = True
        key = (message.tick.mode, message.tick.concurrency)
        # The load a crash came at is counted from the requests' own times (`bench.summary.in_flight_at_loss`),
        # never from a tick's in-flight sum: right after a crash one probe process may report its requests failed
        # while another still reports its own running. A new count goes on to the screen (its crash card).
        at_loss = message.tick.in_flight_at_loss
        if at_loss is None or self.in_flight_at_loss.get(key) == at_loss:
            message.stop()
        else:
            self.in_flight_at_loss[key] = at_loss
        if not self.charts_shown:  # no live chart on a short terminal: the running level's figure on the table
            tick = message.tick
            total = f"/{tick.total}" if tick.total else ""
            live = f"{tick.mode} C={tick.concurrency} {rate(tick.tok_s)} tok/s, {tick.done}{total} requests"
            self.query_one(BenchTable).border_subtitle = f"{self._table_state} · {live}"

    def cycle_chart(self) -> str:
        """Switch the right-hand chart to its next view (tok/s by C, speedup, Pareto); returns its name."""
        return self.query_one(CurvesChart).cycle_view()

    def new_sweep(self) -> None:
        """Clear the live chart (and the last crash card) when the user starts a sweep."""
        self.query_one(LiveChart).clear()
        self.in_flight_at_loss.clear()
        self.show_crash_card("")
