"""The fleet view: several hosts (or Slurm jobs) in one cockpit, `specdash connect a b c` or `[fleet.NAME]`.

`FleetApp` is the dashboard app (`SpecdashApp`: help, quit, workers, screenshots) over many sessions. Each host
has its own session and supervised connection, run in a worker of its own: one host that is unreachable, slow
or hostile fails its own worker and its own row, never the others. The default screen is `FleetScreen`: one
row per host (`core.fleet.HostRow`, folded from the session's events), redrawn at most twice a second. `enter`
opens that host's dashboard (made on first use, then kept); `backspace` goes back to the fleet; `]` and `[`
cycle the hosts, on the fleet and on a dashboard.

Until its dashboard is first opened, a host keeps only what a dashboard needs to start from: the newest status,
modes, GPU and bench snapshots and a bounded tail of log batches (`TAIL_BATCHES`). Idle hosts therefore cost a
session, a connection and a row (benchmarks/fleet_cost.py measures it).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static
from textual.worker import Worker, WorkerState

from specdash.config import UIConfig
from specdash.core.events import LogBatch, Notice, SessionEvent
from specdash.core.fleet import HostRow
from specdash.errors import SpecdashError
from specdash.remote.events import ConnectionEvent
from specdash.server.session import Session
from specdash.ui.app import SpecdashApp, to_message
from specdash.ui.messages import LogMailbox
from specdash.ui.screens.dashboard import DashboardScreen

TAIL_BATCHES = 400
"""Log batches (about 100 s of a busy log) a host keeps for its dashboard before that is first opened."""
REDRAW_S = 0.5
"""The fleet table is redrawn at most this often."""
COLUMNS = ("host", "engine", "mode", "state", "ranks", "tok/s", "run", "GPU", "alert")

FLEET_BINDINGS: list[BindingType] = [
    Binding("enter", "open_host", "Open", id="fleet-open", tooltip="Open the highlighted host's dashboard"),
    Binding("backspace", "fleet", "Fleet", id="fleet-back", tooltip="Back to the fleet view"),
    Binding("right_square_bracket", "cycle(1)", "Next host", id="fleet-next", tooltip="Next host"),
    Binding("left_square_bracket", "cycle(-1)", "Prev host", id="fleet-prev", tooltip="Previous host"),
]


@dataclass
class FleetHost:
    """One host of the fleet: its session, its row and (once opened) its dashboard."""

    session: Session
    row: HostRow
    dashboard: DashboardScreen | None = None
    mailbox: LogMailbox = field(default_factory=LogMailbox)
    latest: dict[type, object] = field(default_factory=dict)
    tail: deque[LogBatch] = field(default_factory=lambda: deque(maxlen=TAIL_BATCHES))
    shown: int = -1
    """`row.changes` when the table last showed this row."""


class FleetScreen(Screen[None]):
    """One row per host; enter opens it."""

    BINDINGS: ClassVar[list[BindingType]] = [FLEET_BINDINGS[0], FLEET_BINDINGS[2], FLEET_BINDINGS[3]]

    def __init__(self, hosts: Sequence[FleetHost], tick: float | None) -> None:
        super().__init__()
        self.hosts = hosts
        self._tick = tick

    def compose(self) -> ComposeResult:
        yield Static(id="fleet-summary")
        table: DataTable[str] = DataTable(id="fleet-table", cursor_type="row", zebra_stripes=True)
        yield table
        yield Static(id="fleet-detail")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for name in COLUMNS:
            table.add_column(name, key=name)
        for i, host in enumerate(self.hosts):
            table.add_row(*self._cells(host.row), key=str(i))
            host.shown = host.row.changes
        self._summary()
        self._detail()
        if self._tick is not None:
            self.set_interval(REDRAW_S, self.redraw)

    def on_resize(self) -> None:
        self.redraw(force=True)

    def _alert_width(self) -> int:
        return max(12, self.size.width - 76)

    def _cells(self, row: HostRow) -> tuple[str, ...]:
        alert = row.alert
        width = self._alert_width()
        if len(alert) > width:
            alert = alert[: width - 1] + "…"
        return (
            row.label[:18],
            row.engine,
            row.mode[:14],
            row.state[:24],
            row.ranks,
            row.load,
            "-" if row.running is None else str(row.running),
            row.gpu,
            alert,
        )

    def redraw(self, force: bool = False) -> None:
        """Update the rows that changed since the last redraw (all with `force`)."""
        if not self.is_mounted:
            return
        table = self.query_one(DataTable)
        for i, host in enumerate(self.hosts):
            if host.shown == host.row.changes and not force:
                continue
            host.shown = host.row.changes
            for name, value in zip(COLUMNS, self._cells(host.row), strict=True):
                table.update_cell(str(i), name, value, update_width=True)
        self._summary()
        self._detail()

    def _detail(self) -> None:
        """The highlighted host's newest alert in full (its cell is cut to the column), and how to open it."""
        if not self.hosts:
            return
        row = self.hosts[min(max(self.cursor, 0), len(self.hosts) - 1)].row
        text = Text(f"{row.label}: ", style="bold")
        text.append(row.alert or "no alert")
        text.append("  · enter opens its dashboard", style="dim")
        self.query_one("#fleet-detail", Static).update(text)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._detail()

    def _summary(self) -> None:
        rows = [h.row for h in self.hosts]
        ready = sum(1 for r in rows if r.state == "ready")
        starting = sum(1 for r in rows if r.status is not None and r.status.phase.is_startup and r.link == "connected")
        down = sum(1 for r in rows if r.link in ("failed", "lost"))
        alerts = sum(1 for r in rows if r.alert_level == "error")
        text = f"{len(rows)} hosts · {ready} ready · {starting} starting · {down} unreachable · {alerts} with errors"
        if self.size.width - len(text) > 20:
            text += "  (enter: open)"
        self.query_one("#fleet-summary", Static).update(text)

    @property
    def cursor(self) -> int:
        return self.query_one(DataTable).cursor_row

    def action_open_host(self) -> None:
        app = self.app
        assert isinstance(app, FleetApp)
        app.open_host(self.cursor)

    def action_cycle(self, step: int) -> None:
        table = self.query_one(DataTable)
        table.move_cursor(row=(table.cursor_row + step) % max(1, len(self.hosts)))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        app = self.app
        assert isinstance(app, FleetApp)
        app.open_host(event.cursor_row)


class FleetApp(SpecdashApp):
    """The dashboard app over several sessions, with the fleet as its default screen."""

    TITLE = "specdash fleet"
    BINDINGS = [*SpecdashApp.BINDINGS, FLEET_BINDINGS[1], FLEET_BINDINGS[2], FLEET_BINDINGS[3]]

    def __init__(
        self,
        sessions: Sequence[Session],
        *,
        config_ui: UIConfig | None = None,
        clock: Callable[[], float] = time.time,
        tick: float | None = 1.0,
        chart_interval: float = 0.25,
        screenshot_dir: Path | None = None,
    ) -> None:
        if not sessions:
            raise SpecdashError("the fleet needs at least one host")
        super().__init__(
            sessions[0],
            config_ui=config_ui,
            clock=clock,
            tick=tick,
            chart_interval=chart_interval,
            screenshot_dir=screenshot_dir,
        )
        self._ui = config_ui or UIConfig()
        self._tick_s = tick
        self._chart_interval = chart_interval
        self.hosts = [FleetHost(s, HostRow(s.label)) for s in sessions]
        self.fleet = FleetScreen(self.hosts, tick)
        self.current: int | None = None
        """The host whose dashboard is shown (None on the fleet)."""

    def get_default_screen(self) -> Screen[Any]:
        return self.fleet

    def on_mount(self) -> None:
        if self._theme_name in self.available_themes:
            self.theme = self._theme_name
        for i, host in enumerate(self.hosts):
            host.session.subscribe(lambda event, i=i: self._on_host_event(i, event))  # type: ignore[misc]
            self.run_worker(host.session.run(), name=f"{host.session.label}", group=f"session-{i}", exit_on_error=False)

    def _on_host_event(self, i: int, event: SessionEvent | ConnectionEvent) -> None:
        host = self.hosts[i]
        host.row.apply(event)
        if host.dashboard is not None:
            if not isinstance(event, Notice) or self.current == i:
                self._route(host, event)  # another host's toasts stay in its row's alert column
            return
        if isinstance(event, LogBatch):
            if event.reset:
                host.tail.clear()
            host.tail.append(event)
        elif not isinstance(event, Notice):
            host.latest[type(event)] = event

    def _route(self, host: FleetHost, event: object) -> None:
        assert host.dashboard is not None
        message = to_message(event, host.mailbox)  # type: ignore[arg-type]
        if message is not None:
            host.dashboard.takers.get(type(message), host.dashboard).post_message(message)

    def open_host(self, i: int) -> None:
        """Show host `i`'s dashboard (made on first use from what the host kept)."""
        if not 0 <= i < len(self.hosts):
            return
        host = self.hosts[i]
        if host.dashboard is None:
            host.dashboard = DashboardScreen(
                host.session,
                self.run_session_action,
                self._clock,
                chart_interval=self._chart_interval,
                tick=self._tick_s,
                bell=self._ui.bell,
            )
            self.install_screen(host.dashboard, name=f"host-{i}")
            for event in [*host.latest.values(), LogBatch((), reset=True), *host.tail]:
                self._route(host, event)
            host.latest.clear()
            host.tail.clear()
        self.session = host.session
        self.dashboard = host.dashboard
        if self.current is not None:
            self.pop_screen()
        self.current = i
        self.push_screen(f"host-{i}")
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "fleet":
            return self.current is not None  # shown only where there is a fleet to go back to
        return super().check_action(action, parameters)

    def action_fleet(self) -> None:
        """Back to the fleet (the host's session keeps running)."""
        if self.current is not None and self.screen is self.hosts[self.current].dashboard:
            self.pop_screen()
            self.current = None
            self.fleet.query_one(DataTable).focus()
            self.refresh_bindings()

    def action_cycle(self, step: int) -> None:
        if self.current is None:
            self.fleet.action_cycle(step)
            return
        if self.screen is not self.hosts[self.current].dashboard:
            return  # a dialog is open over the dashboard
        self.open_host((self.current + step) % len(self.hosts))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        group = event.worker.group or ""
        if group.startswith("session-") and event.state is WorkerState.ERROR:
            # One host's connection failed for good: its row says so; the other hosts go on.
            error = event.worker.error
            text = error.message if isinstance(error, SpecdashError) else f"{type(error).__name__}: {error}"
            row = self.hosts[int(group.removeprefix("session-"))].row
            row.link = "failed"
            row.apply(Notice(text, "error"))
            return
        super().on_worker_state_changed(event)

    async def _quit(self) -> None:
        async def close(session: Session) -> None:
            try:
                await asyncio.wait_for(session.close(), timeout=3)
            except (SpecdashError, TimeoutError):
                pass

        await asyncio.gather(*(close(h.session) for h in self.hosts))
        self.exit()

    def exit_summary(self) -> str | None:
        """The hosts whose servers keep running after we quit."""
        live = [f"{h.row.label}: {h.row.mode} ({h.row.state})" for h in self.hosts if h.session.server_live()]
        return ("Still running: " + "; ".join(live)) if live else None
