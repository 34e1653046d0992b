"""The one dashboard: header, server panel, modes, GPUs, log, bench; and every key that acts on them.

Message handlers (one per session event type) own all widget updates. Actions read the session's own
answers (`server_live()`, `sweep_running()`) to decide what is possible, so the footer never offers a key
that the session would refuse, and they hand the session call to the app, which runs it in a worker.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from textual import events, on
from textual.app import ComposeResult
from textual.containers import Horizontal, ScrollableContainer, Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Footer, Input, OptionList, Tab, Tabs

from specdash.core.eta import countdown_text
from specdash.core.events import BenchUpdate, LevelRow, ServerStatus
from specdash.core.levels import DEFAULT_LEVELS, around
from specdash.core.status_text import crash_card, is_live, server_name, stop_question, sweep_question
from specdash.core.sweep_summary import sweep_markdown
from specdash.errors import SpecdashError
from specdash.phases import CrashInfo, Phase
from specdash.remote.events import Connected
from specdash.server.adopt import Adoptable
from specdash.server.lifecycle import PortBusy
from specdash.server.session import Session
from specdash.ui.messages import (
    BenchTicked,
    BenchUpdated,
    ConnectionChanged,
    GpuUpdated,
    GreedyUpdated,
    LogLines,
    ModesUpdated,
    NoticePosted,
    StatusChanged,
)
from specdash.ui.screens.confirm import ConfirmScreen, LevelsScreen
from specdash.ui.screens.keys import BENCH_BINDINGS, LOG_BINDINGS, MODE_BINDINGS, SERVER_BINDINGS, VIEW_BINDINGS
from specdash.ui.widgets.bench import BenchPanel, BenchTable
from specdash.ui.widgets.footer import PinnedFooter
from specdash.ui.widgets.gpu import GpuPanel
from specdash.ui.widgets.header import StatusHeader
from specdash.ui.widgets.logpanel import LogPanel
from specdash.ui.widgets.logview import LogView
from specdash.ui.widgets.modes import ModeList
from specdash.ui.widgets.server import ServerPanel

Action = Callable[[], Coroutine[Any, Any, object]]
"""A session call (start, stop, sweep...) to run in a worker."""
RunAction = Callable[[str, Action, str], None]
"""Runs an action in a worker (name, action, group `action` or `sweep`): the app's, so a failure becomes a
notification and the dashboard never reaches into the app."""

_NEEDS_HOST = {"start", "stop", "restart", "switch", "sweep", "ab", "cancel_sweep", "greedy", "rerun_crash"}
"""Actions that talk to the host, so wait for a connection."""

PAGED_BELOW = (100, 34)
"""Below this width or height the dashboard shows one of two pages (server + log, sweep + charts) at a
time, switched with `v`: stacked on 24 rows, every panel would be a few lines of clipped text."""

_LOG_MOVES = {"down": "scroll_down", "up": "scroll_up", "top": "scroll_home", "bottom": "scroll_end"}
"""j/k/g/G as actions of the log view (and of any other scrolling panel)."""
_CURSOR_MOVES: dict[type[Widget], dict[str, str]] = {
    OptionList: {"down": "cursor_down", "up": "cursor_up", "top": "first", "bottom": "last"},
    DataTable: {"down": "cursor_down", "up": "cursor_up", "top": "scroll_top", "bottom": "scroll_bottom"},
}
"""The same keys as actions of the lists with a cursor (modes, sweep levels)."""


class DashboardScreen(Screen[None]):
    """Every panel on one screen from 100x34 up, laid out by the width (see `styles/app.tcss`); two pages
    below that."""

    BINDINGS = [*SERVER_BINDINGS, *MODE_BINDINGS, *BENCH_BINDINGS, *LOG_BINDINGS, *VIEW_BINDINGS]

    HELP_SECTIONS = (
        ("Server", SERVER_BINDINGS),
        ("Modes", MODE_BINDINGS),
        ("Bench", BENCH_BINDINGS),
        ("Log", LOG_BINDINGS),
        ("View", VIEW_BINDINGS),
    )

    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (PAGED_BELOW[0], "-medium"), (150, "-wide")]
    """Width classes for `app.tcss`: below 100 one column, below 150 the side panels in a strip above a
    full-width log, from 150 a side column beside the log."""
    VERTICAL_BREAKPOINTS = [(0, "-short"), (PAGED_BELOW[1], "-tall")]

    ALLOW_IN_MAXIMIZED_VIEW = "#header, Footer"
    """A zoomed panel keeps the header (host, server state) and the footer (keys)."""

    page: reactive[str] = reactive("server", init=False)
    """The page in view when the terminal is too small for both: `server` (server, modes, log) or `bench`."""

    def __init__(
        self,
        session: Session,
        run_action: RunAction,
        clock: Callable[[], float],
        *,
        chart_interval: float,
        tick: float | None,
        bell: bool = True,
    ) -> None:
        """Args:
        session: What the screen shows and controls (its answers decide which keys apply).
        run_action: How a key's session call runs (in one of the app's workers).
        clock: Epoch seconds.
        chart_interval: Minimum seconds between chart redraws.
        tick: Seconds between clock ticks; None disables the timer.
        bell: Ring the terminal bell on notices that ask for it.
        """
        # The page's class from the start: set on mount, it restyled every widget of the screen once more.
        super().__init__(classes="-page-server")
        self.session = session
        self._run_action = run_action
        self._bell = bell
        self._label = session.label
        self._clock = clock
        self._tick = tick
        self._status = ServerStatus(Phase.STOPPED)
        self._connected = False
        self._levels: tuple[int, ...] = DEFAULT_LEVELS
        self._bench: BenchUpdate | None = None
        self._greedy_running = False
        self._crash: CrashInfo | None = None
        """The server's last crash (kept once it is back, for the crash card)."""
        self._countdown: tuple[float | None, float] | None = None
        """The running sweep's expected seconds (None: unknown) and when it began (counted down on the table)."""
        self.quit_stops_server = False
        """Quitting stops the server too (the demo): the quit question says so instead of `specdash down`."""
        self.touring = False
        """Set by the app while the autoplay tour runs: the paged layout follows the tour (`_follow_tour`)."""
        self._log_panel = LogPanel(id="log")
        self._bench_panel = BenchPanel(chart_interval=chart_interval, id="bench")
        self.takers: dict[type[Message], Widget] = {
            LogLines: self._log_panel.view,
            BenchTicked: self._bench_panel.live_chart,
        }
        """Where the app posts the live data, straight to the widget that shows it (the rest comes here)."""

    def compose(self) -> ComposeResult:
        yield StatusHeader(self._label, self._clock, id="header")
        yield Tabs(Tab("Server + log", id="page-server"), Tab("Sweep + charts", id="page-bench"), id="pages")
        with Horizontal(id="main"):
            with Vertical(id="side"):
                yield ServerPanel(id="server")
                with Vertical(id="side-lists"):
                    yield ModeList(id="modes")
                    yield GpuPanel(id="gpus")
            yield self._log_panel
        yield self._bench_panel
        # The GPUs again, for the sweep page of a small terminal (the strip above the log has no room).
        yield GpuPanel(id="gpus-bench", summary=True)
        yield PinnedFooter()

    def on_mount(self) -> None:
        self._tick_clock()
        if self._tick:
            # Uptime, elapsed and the reconnect countdown move once a second; tests pass tick=None.
            self.set_interval(self._tick, self._tick_clock)
        self.query_one(ModeList).focus()

    def _tick_clock(self) -> None:
        now = self._clock()
        self.query_one(ServerPanel).now = now
        self.query_one(StatusHeader).now = now
        self._show_countdown()

    # ----------------------------------------------------------------------------------- layout, pages

    @property
    def paged(self) -> bool:
        """Whether the terminal is small enough for one page at a time."""
        return self.has_class("-narrow") or self.has_class("-short")

    def on_resize(self, _event: events.Resize) -> None:
        # The breakpoint classes are set by now: the footer offers `v` only when there are pages.
        footer = self.query_one(Footer)
        footer.compact = self.has_class("-narrow")
        footer.show_command_palette = not footer.compact  # ctrl+p still works; 80 columns need the room
        self.refresh_bindings()

    def watch_page(self, page: str) -> None:
        self.set_class(page == "server", "-page-server")
        self.set_class(page == "bench", "-page-bench")
        tabs = self.query_one("#pages", Tabs)
        if tabs.active != f"page-{page}":
            tabs.active = f"page-{page}"
        if self.paged:
            # Focus what is on the page, so keys act on something in view.
            focused = self.focused
            wanted: Widget = self.query_one(BenchTable) if page == "bench" else self.query_one(ModeList)
            if focused is None or focused is not wanted and not self._on_page(focused, page):
                wanted.focus()

    def _on_page(self, widget: Widget, page: str) -> bool:
        section = self.query_one("#bench" if page == "bench" else "#main")
        return widget is section or section in widget.ancestors

    @on(Tabs.TabActivated, "#pages")
    def _tab_activated(self, event: Tabs.TabActivated) -> None:
        if event.tab.id is not None:
            self.page = event.tab.id.removeprefix("page-")

    def show_page(self, page: str) -> None:
        """Bring `page` into view when the dashboard is paged (a sweep starts: its table)."""
        if self.paged:
            self.page = page

    def action_page(self) -> None:
        self.page = "bench" if self.page == "server" else "server"

    def action_zoom(self) -> None:
        """The focused panel (the log when nothing is focused) on the whole screen, or back."""
        if self.maximized is not None:
            self.minimize()
        else:
            self.maximize(self._zoom_target())
        self.refresh_bindings()

    def _zoom_target(self) -> Widget:
        """What `z` zooms: the focused panel when it is a panel in view; else the main panel of the page in
        view. A widget out of view (the other page's panel, a closed search prompt) or one that is not a panel
        (the page tabs, an input) zoomed to a blank screen."""
        focused = self.focused
        if (
            focused is not None
            and focused.allow_maximize
            and not isinstance(focused, Tabs | Input)
            and focused.region.area > 0
        ):
            return focused
        return self.query_one(BenchTable if self.paged and self.page == "bench" else LogView)

    def action_minimize(self) -> None:
        super().action_minimize()
        self.refresh_bindings()

    def action_move(self, where: str) -> None:
        """j/k/g/G: move the focused list's cursor, scroll the focused panel, or scroll the log."""
        focused = self.focused
        for kind, moves in _CURSOR_MOVES.items():
            if isinstance(focused, kind):
                getattr(focused, f"action_{moves[where]}")()
                self.refresh_bindings()  # the highlighted mode decides what s and m do
                return
        # Another scrolling panel in focus (the lines under the sweep table) scrolls; else the log does.
        target = focused if isinstance(focused, ScrollableContainer) else self.query_one(LogView)
        getattr(target, f"action_{_LOG_MOVES[where]}")()

    def action_wrap(self) -> None:
        view = self.query_one(LogPanel).view
        view.wrap = not view.wrap

    def action_timestamps(self) -> None:
        view = self.query_one(LogPanel).view
        view.timestamps = not view.timestamps

    # ------------------------------------------------------------------------------- session events

    @on(StatusChanged)
    def _status_changed(self, message: StatusChanged) -> None:
        self._status = message.status
        if message.status.crash is not None:
            self._crash = message.status.crash
        self._show_crash_card()
        self.query_one(ServerPanel).status = message.status
        self.query_one(StatusHeader).status = message.status
        self.query_one(ModeList).status = message.status
        self._follow_tour()
        self.refresh_bindings()

    def end_tour(self) -> None:
        """The tour ended (or a key stopped it): its last screen is its payoff, the sweep page with the verdict."""
        if self.touring and self._bench is not None:
            self.show_page("bench")
        self.touring = False

    def _follow_tour(self) -> None:
        """The tour (`demo --autoplay`) shows what it talks about on a paged terminal too: the server page
        while a server starts (the startup timeline, the log), the sweep page while it measures and at the
        end (the table, the charts, the verdict)."""
        if not self.touring:
            return
        ready = self._status.phase is Phase.READY
        self.show_page("bench" if ready and self._bench is not None else "server")

    @on(ModesUpdated)
    def _modes_updated(self, message: ModesUpdated) -> None:
        self.query_one(ModeList).modes = message.modes
        self.refresh_bindings()

    @on(ConnectionChanged)
    def _connection_changed(self, message: ConnectionChanged) -> None:
        self._connected = isinstance(message.event, Connected)
        self.query_one(StatusHeader).connection = message.event
        self.query_one(ServerPanel).stale = not self._connected
        self.refresh_bindings()

    @on(GpuUpdated)
    def _gpu_updated(self, message: GpuUpdated) -> None:
        for panel in self.query(GpuPanel):
            panel.stats = message.stats

    @on(BenchTicked)
    def _load_at_loss(self, message: BenchTicked) -> None:
        # The sweep panel lets a tick through only when it brings a level's load at a lost connection: the crash
        # card (drawn when the crash was noted, maybe before this count came) gets it.
        message.stop()
        self._show_crash_card()

    @on(BenchUpdated)
    def _bench_updated(self, message: BenchUpdated) -> None:
        self._bench = message.update
        if not message.update.running and self._countdown is not None:
            self._countdown = None  # the sweep ended: no time left to count
            self.query_one(BenchPanel).show_countdown("")
        self.query_one(BenchPanel).show_update(message.update)
        self._show_crash_card()
        self._follow_tour()
        self.refresh_bindings()

    @on(GreedyUpdated)
    def _greedy_updated(self, message: GreedyUpdated) -> None:
        self._greedy_running = message.update.running
        self.query_one(BenchPanel).show_greedy(message.update)
        self.refresh_bindings()

    @on(NoticePosted)
    def _notice(self, message: NoticePosted) -> None:
        notice = message.notice
        self.notify(notice.text, severity=notice.severity, timeout=8 if notice.severity == "error" else 5)
        if notice.bell and self._bell:
            self.app.bell()

    # ------------------------------------------------------------------------------------ what applies

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        applies = self._applies(action)
        if applies and action in _NEEDS_HOST and not self._connected:
            return None  # shown greyed out: it applies, but the host is unreachable right now
        return applies

    def _applies(self, action: str) -> bool:
        """Whether `action` makes sense in the current state (the footer hides it otherwise)."""
        session = self.session
        live, sweeping = session.server_live(), session.sweep_running()
        modes = self.query_one(ModeList)
        match action:
            case "start":
                return not live and modes.selected is not None
            case "stop":  # after a crash: cleans up what is left in the run's process group
                return live or (self._status.phase is Phase.CRASHED and bool(self._status.leftovers))
            case "restart":
                return live
            case "switch":
                return live and modes.selected not in (None, self._status.mode)
            case "show_crash":
                return self._status.phase is Phase.CRASHED and self._status.crash is not None
            case "mark":
                return len(modes.names) > 1
            case "sweep":
                return self._status.phase is Phase.READY and not sweeping
            case "ab":
                return len(modes.marked) > 1 and not sweeping
            case "cancel_sweep":  # while a tune runs (its levels, or a restart between them) esc says how to stop it
                return sweeping or session.tune_running()
            case "greedy":
                return self._status.phase is Phase.READY and not sweeping and not self._greedy_running
            case "chart_view":
                return self.query_one(BenchPanel).has_data
            case "copy_summary":
                return self._bench is not None and bool(self._bench.curves)
            case "rerun_crash":
                return self._crashed_level() is not None and self._status.phase is Phase.READY and not sweeping
            case "search":  # a priority key: a `/` typed into a prompt is the prompt's
                return not isinstance(self.focused, Input)
            case "search_next" | "search_previous":
                return bool(self.query_one(LogPanel).view.needle)
            case "page":
                return self.paged and self.maximized is None
        return True

    def why_not(self, action: str) -> str:
        """Why `action` does nothing now, in one line (said when its key is pressed anyway)."""
        if action in _NEEDS_HOST and self._applies(action) and not self._connected:
            return f"Not connected to {self._label}: the key works again once the connection is back."
        session, status = self.session, self._status
        modes = self.query_one(ModeList)
        sweeping = "A sweep is running (esc cancels it)."
        match action:
            case "start":
                return "A server is running: x stops it, m switches it to the highlighted mode."
            case "stop" | "restart":
                return "No server of ours is running: s starts the highlighted mode."
            case "switch":
                if not session.server_live():
                    return "No server is running: s starts the highlighted mode."
                return f"{status.mode} is the mode running: highlight another (1-9, j/k) to switch to it."
            case "show_crash":
                return "No crash to show."
            case "mark":
                return "One mode only: there is nothing to compare it with."
            case "sweep":
                return sweeping if session.sweep_running() else "A sweep measures the live mode: start one (s)."
            case "ab":
                if session.sweep_running():
                    return sweeping
                return f"An A/B needs two marked modes (space marks the highlighted one; {len(modes.marked)} marked)."
            case "cancel_sweep":
                return "No sweep is running."
            case "rerun_crash":
                if (row := self._crashed_level()) is None:
                    return "No sweep level crashed the server."
                if session.sweep_running():
                    return sweeping
                c = row.concurrency
                return f"The server is not ready: s starts {row.mode}, then R reruns the levels around C={c}."
            case "greedy":
                return "The greedy check needs a ready server and no sweep running."
            case "chart_view" | "copy_summary":
                return "No finished level yet: b sweeps the live mode."
            case "search_next" | "search_previous":
                return "No search yet: / searches the log."
            case "page":
                return "The whole dashboard is on one page at this size."
        return ""

    def on_key(self, event: events.Key) -> None:
        """A dashboard key whose action does not apply now (the footer hides it) says why, in one line,
        instead of doing nothing. Keys the focused widget or a binding took never come here."""
        if event.key == "escape":
            return  # pressed out of habit (closing things): silence, not a notice
        for binding in self._bindings.key_to_bindings.get(event.key, []):
            action = binding.action.partition("(")[0]
            if self.check_action(action, ()) is not True and (why := self.why_not(action)):
                event.stop()
                self.notify(why, timeout=4)
                return

    # --------------------------------------------------------------------------------------- actions

    def _server_name(self) -> str:
        return server_name(self._status, self._label)

    def _sweep_clause(self) -> str:
        return (
            " The running sweep will be cancelled; finished levels are kept." if (self.session.sweep_running()) else ""
        )

    def quit_question(self) -> str:
        """What quitting now stops and what it keeps (asked while a sweep, or a tune, runs)."""
        if self.session.server_live() and self.quit_stops_server:
            server = f"{self._server_name()} stops with it (nothing keeps running)"
        elif self.session.server_live():
            server = f"{self._server_name()} keeps running (specdash down {self._label} stops it)"
        else:
            server = "No server of ours is running"
        tune = getattr(self.app, "tune_progress", None)
        if self.session.tune_running() and tune is not None:
            return (
                f"Quit specdash? Tune {tune.name} stops; its finished levels are kept in its journal "
                f"({tune.resume} goes on from them). {server}."
            )
        rows = self._bench.rows if self._bench is not None else ()
        modes = list(dict.fromkeys(row.mode for row in rows))
        kind = f"A/B ({' vs '.join(modes)})" if len(modes) > 1 else "sweep"
        done = sum(1 for row in rows if row.status in ("done", "failed"))
        left = len(rows) - done
        stops = f"The running {kind} stops" + (f", {left} of {len(rows)} levels unrun" if left else "")
        levels = f"{done} finished level{'s' if done != 1 else ''}"
        kept = f"its {levels} and every completed request are kept in the local store"
        return f"Quit specdash? {stops}; {kept}. {server}."

    def _confirm(self, question: str, yes: str, then: Callable[[], None]) -> None:
        def answered(ok: bool | None) -> None:
            if ok:
                then()

        self.app.push_screen(ConfirmScreen(question, yes=yes), answered)

    def _run(self, name: str, call: Callable[[], Coroutine[Any, Any, object]]) -> None:
        self._run_action(name, call, "action")

    def _refused(self, action: str) -> bool:
        """Whether the session refuses `action` now (a running tune owns the server); if so, says why and how
        to end that, in one notification, before any question is asked."""
        why = self.session.refusal(action)
        if why is not None:
            self.notify(why, title="Tune running", severity="warning", timeout=8)
        return why is not None

    def action_start(self) -> None:
        mode = self.query_one(ModeList).selected
        if mode is not None and not self._refused("start"):
            self._run(f"start {mode}", lambda: self._start_or_offer_adoption(mode))

    async def _start_or_offer_adoption(self, mode: str) -> None:
        """Start `mode`; when its port is held by a server specdash did not start, offer to adopt it."""
        session = self.session
        try:
            await session.start(mode)
        except PortBusy as busy:
            if busy.pid is None:
                raise
            target = await session.find_adoptable(pid=busy.pid)
            if not target.ok:
                raise SpecdashError(f"{busy.message}\n{target.describe()}") from None
            self.app.call_later(self._offer_adoption, target)

    def _offer_adoption(self, target: Adoptable) -> None:
        question = (
            f"Port {target.port} on {self._label} is held by a server specdash did not start:\n"
            f"{target.describe()}\nAdopt it? specdash watches its log and health and can bench it; it sends "
            "no signal (stopping it later asks again)."
        )
        if not self._refused("adopt"):
            self._confirm(question, "Adopt", lambda: self._run("adopt", lambda: self.session.adopt(target)))

    def action_stop(self) -> None:
        if self._refused("stop"):
            return
        question = stop_question(self._status, self._label) + self._sweep_clause()
        yes = "Clean up" if self._status.phase is Phase.CRASHED else "Stop"
        self._confirm(question, yes, lambda: self._run("stop", self.session.stop))

    def action_restart(self) -> None:
        if self._refused("restart"):
            return
        question = f"Restart {self._server_name()}? It serves nothing until it is ready again.{self._sweep_clause()}"
        self._confirm(question, "Restart", lambda: self._run("restart", self.session.restart))

    def action_switch(self) -> None:
        mode = self.query_one(ModeList).selected
        if mode is None or self._refused("switch"):
            return
        question = f"Stop {self._server_name()} and start {mode}?{self._sweep_clause()}"

        async def switch() -> None:
            await self.session.switch(mode)  # how it went arrives as a notice

        self._confirm(question, "Switch", lambda: self._run(f"switch to {mode}", switch))

    def show_tour(self, modes: list[str]) -> None:
        """Autoplay: highlight and mark the modes the tour compares, so the audience sees what runs."""
        mode_list = self.query_one(ModeList)
        if modes and modes[0] in mode_list.names:
            mode_list.select_number(mode_list.names.index(modes[0]) + 1)
        mode_list.marked = frozenset(modes)
        self.query_one(BenchPanel).new_sweep()
        self.touring = True
        self.refresh_bindings()

    def action_select_mode(self, number: int) -> None:
        if self.query_one(ModeList).select_number(number):
            self.refresh_bindings()

    def action_mark(self) -> None:
        self.query_one(ModeList).toggle_mark()
        self.refresh_bindings()

    def action_show_crash(self) -> None:
        crash = self._status.crash
        panel = self.query_one(LogPanel)
        if crash is None:
            return
        self.show_page("server")
        line = panel.view.find_text(crash.reason)
        if line is None or not panel.view.jump_to(line):
            self.notify("The crash line is no longer in the log view; the full log is on the host.", severity="warning")

    def action_sweep(self) -> None:
        if self._refused("sweep"):
            return
        mode = self._status.mode
        self._ask_levels(f"Sweep {mode}: concurrency levels", [mode], None)

    def action_ab(self) -> None:
        if self._refused("ab"):
            return
        modes = [name for name in self.query_one(ModeList).names if name in self.query_one(ModeList).marked]
        # The reference is the one the user chose (the first marked mode), whatever runs now: measuring the
        # live mode first is an order (it saves one restart, a long load), never a change of reference.
        reference = modes[0] if modes else None
        if self._status.mode in modes and is_live(self._status):
            modes.remove(self._status.mode)
            modes.insert(0, self._status.mode)
        # Says what the sweep will do from the same state the session decides on (`sweep_plan`).
        warn = sweep_question(self._status, modes, self._label)
        self._ask_levels(f"A/B {' vs '.join(modes)}: concurrency levels", modes, warn, reference)

    def _ask_levels(
        self,
        title: str,
        modes: list[str],
        warning: str | None,
        reference: str | None = None,
        levels: tuple[int, ...] | None = None,
    ) -> None:
        def expect(levels: tuple[int, ...]) -> str:
            return self.session.sweep_estimate(modes, levels).text()

        offered = levels

        def chosen(levels: tuple[int, ...] | None) -> None:
            if not levels:
                return
            if offered is None:  # a rerun's levels are not the next sweep's default
                self._levels = levels
            estimate = self.session.sweep_estimate(modes, levels)

            def go() -> None:
                self.query_one(BenchPanel).new_sweep()
                self.show_page("bench")
                self._countdown = (estimate.seconds, self._clock())
                self._show_countdown()
                self._run_action("sweep", lambda: self.session.sweep(modes, levels, reference=reference), "sweep")

            if warning:
                self._confirm(f"{warning}\n\nExpected: {estimate.text()}.", "Run A/B", go)
            else:
                go()

        self.app.push_screen(LevelsScreen(title, offered or self._levels, expect), chosen)

    def _crashed_level(self) -> LevelRow | None:
        """The level the last sweep crashed the server at, if it did."""
        rows = self._bench.rows if self._bench is not None else ()
        return next((row for row in rows if row.crash), None)

    def _rerun_levels(self, row: LevelRow) -> tuple[int, ...]:
        rows = self._bench.rows if self._bench is not None else ()
        return around([r.concurrency for r in rows if r.mode == row.mode], row.concurrency)

    def _show_crash_card(self) -> None:
        """The crash tied to its level under the sweep table (`core.status_text.crash_card`)."""
        row = self._crashed_level()
        if row is None:
            self.query_one(BenchPanel).show_crash_card("")
            return
        excerpt = self._crash.excerpt if self._crash is not None else ()
        # The level's record when it ended; the live count while it was cut off mid-run (same samples, same rule).
        running = row.in_flight_at_loss
        if running is None:
            running = self.query_one(BenchPanel).in_flight_at_loss.get((row.mode, row.concurrency))
        back = self._status.phase is Phase.READY
        card = crash_card(row.mode, row.concurrency, row.crash, excerpt, running, self._rerun_levels(row), back)
        self.query_one(BenchPanel).show_crash_card(card)

    def action_rerun_crash(self) -> None:
        row = self._crashed_level()
        if row is None or self._refused("sweep"):
            return
        modes = [row.mode]
        self._ask_levels(
            f"Rerun {row.mode} around its crash at C={row.concurrency}: concurrency levels",
            modes,
            sweep_question(self._status, modes, self._label),
            levels=self._rerun_levels(row),
        )

    def _show_countdown(self) -> None:
        """The running sweep's expected time left on the table's title, counted down each second; it says
        `overdue by ...` once the estimate has run out, never a negative time."""
        if self._countdown is None:
            return
        expected, since = self._countdown
        self.query_one(BenchPanel).show_countdown(countdown_text(expected, self._clock() - since))

    def action_cancel_sweep(self) -> None:
        if self._refused("cancel_sweep"):
            return
        self._confirm(
            "Cancel the running sweep? Finished levels are kept.",
            "Cancel sweep",
            lambda: self._run("cancel sweep", self.session.cancel_sweep),
        )

    def greedy_reference(self) -> str | None:
        """The mode the greedy check compares the live one against: the first marked mode (the A/B's
        reference), else the first configured one; the live mode itself when it is that one (its outputs are
        then stored as the reference)."""
        modes = self.query_one(ModeList)
        live = self._status.mode
        marked = [name for name in modes.names if name in modes.marked]
        for candidates in (marked, modes.names):
            if candidates:
                return candidates[0]
        return live

    def action_greedy(self) -> None:
        reference = self.greedy_reference()
        if reference is None or self._refused("greedy"):
            return
        self.show_page("bench")
        self._run("greedy check", lambda: self.session.check_greedy(reference))

    def action_copy_summary(self) -> None:
        """`y`: the sweep as Markdown and, after an A/B, what its verdict means in the engine's own launch
        flags (the policy: which mode at which load, `core.spec_export`), to the clipboard (Textual writes
        OSC 52, which terminals honour over SSH too), ready to paste into a pull request."""
        update = self._bench
        if update is None:
            return
        text = sweep_markdown(self._label, update.rows, update.curves, update.crossover_text)
        if update.policy:
            text += "\n" + update.policy
            what = "the sweep and its policy in the engine's flags as Markdown"
        else:
            what = "the sweep as Markdown (no policy: it needs two modes measured, an A/B)"
        self.app.copy_to_clipboard(text)
        self.notify(f"Copied {what}, {text.count(chr(10))} lines: paste it into a PR.", timeout=5)

    def action_chart_view(self) -> None:
        panel = self.query_one(BenchPanel)
        if not panel.charts_shown:  # a key that does nothing says why, in one line
            self.notify(
                f"The charts need {PAGED_BELOW[1]} rows (this terminal has {self.size.height}): "
                "the bold line under the table says what they would.",
                timeout=5,
            )
            return
        panel.cycle_chart()

    def action_follow(self) -> None:
        view = self.query_one(LogPanel).view
        view.follow = not view.follow

    def action_errors(self) -> None:
        view = self.query_one(LogPanel).view
        view.errors_only = not view.errors_only

    def action_search(self) -> None:
        self.query_one(LogPanel).open_search()

    def action_search_next(self) -> None:
        self.query_one(LogPanel).find(forward=True)

    def action_search_previous(self) -> None:
        self.query_one(LogPanel).find(forward=False)
