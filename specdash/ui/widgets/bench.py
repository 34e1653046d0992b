"""The bench area: the level table (client and server figures side by side) and the two charts."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.reactive import reactive
from textual.widgets import DataTable, Label

from specdash.core.events import BenchTick, BenchUpdate, LevelRow
from specdash.ui.format import rate
from specdash.ui.widgets.charts import CurvesChart, LiveChart

COLUMNS = ("mode", "C", "state", "tok/s", "server", "accept", "TTFT", "ok/fail", "note")

STATUS_TEXT = {"pending": "·", "warmup": "warmup", "running": "running", "done": "done", "failed": "FAILED"}


def row_cells(row: LevelRow) -> tuple[str, ...]:
    """One level as table cells: the client's tok/s beside the server's, acceptance length, warning."""
    ttft = "-" if row.ttft_p50_ms is None else f"{row.ttft_p50_ms:,.0f}ms"
    accept = "-" if row.accept_length is None else f"{row.accept_length:.2f}"
    return (
        row.mode,
        str(row.concurrency),
        STATUS_TEXT.get(row.status, row.status),
        rate(row.tok_s),
        rate(row.server_tok_s),
        accept,
        ttft,
        f"{row.ok}/{row.failed}",
        row.warning,
    )


class BenchTable(DataTable[str]):
    """Levels of the current sweep, in order."""

    def on_mount(self) -> None:
        self.border_title = "Sweep"
        self.cursor_type = "row"
        self.zebra_stripes = True
        self.add_columns(*COLUMNS)

    def show_rows(self, rows: tuple[LevelRow, ...]) -> None:
        """Replace every row (a sweep has tens of levels at most, so redrawing all is cheap)."""
        self.clear()
        for row in rows:
            self.add_row(*row_cells(row), key=f"{row.mode}@{row.concurrency}")
        running = [i for i, row in enumerate(rows) if row.status in ("warmup", "running")]
        if running:
            self.move_cursor(row=running[-1], animate=False)


class BenchPanel(Horizontal):
    """Table, live chart and curves; a one-line hint until the first sweep."""

    has_data: reactive[bool] = reactive(False)
    """True once a sweep has reported anything (the panel grows from a hint to its full height)."""

    def __init__(self, *, chart_interval: float = 0.25, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self._interval = chart_interval
        self._crossover_text = ""

    def compose(self) -> ComposeResult:
        yield Label("No sweep yet.  b: sweep the live mode   space: mark modes, a: A/B", id="bench-hint")
        yield BenchTable(id="bench-table")
        yield LiveChart(interval=self._interval, id="live-chart")
        yield CurvesChart(interval=self._interval, id="curves-chart")

    def watch_has_data(self, has_data: bool) -> None:
        self.set_class(not has_data, "-empty")

    def show_update(self, update: BenchUpdate) -> None:
        """A level started or ended: new table, new curves."""
        self.has_data = True
        self.query_one(BenchTable).show_rows(update.rows)
        self.query_one(CurvesChart).set_curves(update.curves, update.crossover)
        self._crossover_text = update.crossover_text
        table = self.query_one(BenchTable)
        table.border_subtitle = update.crossover_text or ("running" if update.running else "")

    def add_tick(self, tick: BenchTick) -> None:
        """A live throughput point."""
        self.has_data = True
        self.query_one(LiveChart).add(tick)

    def new_sweep(self) -> None:
        """Clear the live chart when the user starts a sweep."""
        self.query_one(LiveChart).clear()
