"""`SpecdashApp`: one dashboard over one `Session`, and the `make_app` factory the CLI and tests share.

The app subscribes a listener that turns each session event into a typed message for the dashboard, runs
`session.run()` in a long-lived worker, and runs every action (start, stop, sweep...) in a worker of its
own. Workers never touch widgets; one `Worker.StateChanged` handler turns a failure into a notification.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from functools import partial
from pathlib import Path, PurePath
from typing import Any

from textual import events, work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from specdash.config import UIConfig
from specdash.core.eta import SweepEstimate, countdown_text
from specdash.core.events import (
    BenchTick,
    BenchUpdate,
    GpuStats,
    GreedyUpdate,
    LogBatch,
    ModesChanged,
    Notice,
    ServerLoad,
    ServerStatus,
    SessionEvent,
    TuneProgress,
)
from specdash.errors import SpecdashError
from specdash.remote.events import Connected, ConnectionEvent
from specdash.server.remote_session import RemoteSession
from specdash.server.session import Session
from specdash.tune.job import DashboardTunes, Tunes
from specdash.tune.journal import Journal
from specdash.tune.report import load_latest
from specdash.ui.messages import (
    BenchTicked,
    BenchUpdated,
    ConnectionChanged,
    GpuUpdated,
    GreedyUpdated,
    LogLines,
    LogMailbox,
    ModesUpdated,
    NoticePosted,
    StatusChanged,
    TuneUpdated,
)
from specdash.ui.screens.confirm import ConfirmScreen
from specdash.ui.screens.dashboard import DashboardScreen
from specdash.ui.screens.help import QUIT_KEEPS_SERVER, HelpRow, HelpScreen
from specdash.ui.screens.tune import TuneScreen
from specdash.ui.styles import css_paths

AUTOPLAY_LEVELS = (1, 2, 5, 10)
"""Concurrency levels of the autoplay tour (enough to show where speculation stops paying: 2 to 5)."""

TEXTUAL_DUPLICATES = frozenset({"Quit", "Keys", "Maximize", "Minimize"})
"""Textual's palette commands that the dashboard has its own key for (q, ?, z)."""

APP_BINDINGS: list[Binding] = [
    Binding("question_mark", "help", "Help", id="help", tooltip="List every key"),
    Binding("q", "quit", "Quit", id="quit", tooltip="Quit specdash (asks first while a sweep runs)"),
    Binding(
        "T", "tune", "Tune", id="tune", tooltip="Speculation tune: start one of [tune.NAME], watch it live", show=False
    ),
]


def to_message(event: SessionEvent | ConnectionEvent, logs: LogMailbox) -> Message | None:
    """The dashboard message for one session event; None for a log batch that joins one already waiting in
    `logs`."""
    match event:
        case LogBatch():
            return LogLines(logs) if logs.put(event) else None
        case ServerStatus():
            return StatusChanged(event)
        case ModesChanged():
            return ModesUpdated(event)
        case GpuStats():
            return GpuUpdated(event)
        case BenchTick():
            return BenchTicked(event)
        case BenchUpdate():
            return BenchUpdated(event)
        case GreedyUpdate():
            return GreedyUpdated(event)
        case Notice():
            return NoticePosted(event)
        case TuneProgress():
            return TuneUpdated(event)
        case ServerLoad():
            return None  # the fleet row's numbers; the dashboard reads the same lines in its log
    return ConnectionChanged(event)


class SpecdashApp(App[None]):
    """The dashboard for one host."""

    TITLE = "specdash"
    CSS_PATH = list[str | PurePath](css_paths())
    BINDINGS = list[Binding | tuple[str, str] | tuple[str, str, str]](APP_BINDINGS)

    def __init__(
        self,
        session: Session,
        *,
        config_ui: UIConfig | None = None,
        keymap: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.time,
        tick: float | None = 1.0,
        chart_interval: float = 0.25,
        start_mode: str | None = None,
        autoplay: bool = False,
        quit_note: str = QUIT_KEEPS_SERVER,
        quit_stops_server: bool = False,
        screenshot_dir: Path | None = None,
        tunes: Tunes | None = None,
    ) -> None:
        """Args:
        session: What the dashboard shows and controls.
        config_ui: `[ui]` preferences (bell, theme).
        keymap: Binding id -> keys, from `[keymap]`.
        clock: Epoch seconds, for uptime, elapsed and countdowns (fixed in tests).
        tick: Seconds between clock ticks; None disables the timer (snapshots must not race it).
        chart_interval: Minimum seconds between chart redraws; 0 redraws at once (tests).
        start_mode: Start this mode once connected and attached, if no server of ours is live.
        autoplay: The presenter's tour: an A/B sweep of the first two modes; any key stops it.
        quit_note: What `q` does to the server, for the help screen (the demo stops its simulator).
        quit_stops_server: Quitting stops the server (the demo): the quit question says so, not `specdash down`.
        screenshot_dir: Where the palette's Screenshot saves (created if missing); default `paths.screenshot_dir()`.
        tunes: The `[tune.NAME]` entries the T view starts (`specdash.tune.job.DashboardTunes` of a
            `RemoteSession` by default; none for other sessions).
        """
        super().__init__()
        if tunes is None and isinstance(session, RemoteSession):
            tunes = DashboardTunes(session)
        self.tunes = tunes
        """The tunes the T view lists and starts (None: the session has none)."""
        ui = config_ui or UIConfig()
        self.session = session
        self.bell_enabled = ui.bell
        """Ring the terminal bell on notices that ask for it."""
        self._theme_name = ui.theme
        self._clock = clock
        self.dashboard = DashboardScreen(
            session, self.run_session_action, clock, chart_interval=chart_interval, tick=tick, bell=ui.bell
        )
        """The one dashboard screen; session messages are posted to it."""
        self.dashboard.quit_stops_server = quit_stops_server
        if keymap:
            self.set_keymap(dict(keymap))
        self._start_mode = start_mode
        self._autoplay = autoplay
        self.quit_note = quit_note
        """What `q` does to the server, in a sentence (help screen)."""
        self._screenshot_dir = screenshot_dir
        self.last_status: ServerStatus | None = None
        """The session's last word on the server: what `connect` reports as still running on exit."""
        self._touring = False
        self.connection_error: str | None = None
        """Why the first connect failed (None: it did not, or not yet); the command exits non-zero with it."""
        self.tune_progress: TuneProgress | None = None
        """The last step of a tune started from this dashboard (what the Tune view shows first)."""
        self._tick = tick
        self._tune_countdown: tuple[float | None, float] | None = None
        """The running tune's expected seconds (its confirmation's estimate) and when it started; None: none."""
        self._session_modes = ModesChanged(())
        self._log_mailbox = LogMailbox()
        self._connected = asyncio.Event()
        self._attached = asyncio.Event()
        """Set by the first ServerStatus after the first Connected: the session has looked for a live run."""

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Textual's notification, held while a question waits for its answer (`ConfirmScreen.held`)."""
        options: dict[str, Any] = {"title": title, "severity": severity, "timeout": timeout, "markup": markup}
        question = self.screen_stack[-1] if self.screen_stack else None
        if isinstance(question, ConfirmScreen) and question.is_mounted:
            question.held.append((message, options))
            return
        super().notify(message, **options)

    def get_default_screen(self) -> Screen[Any]:
        return self.dashboard

    def on_mount(self) -> None:
        if self._theme_name in self.available_themes:
            self.theme = self._theme_name
        else:
            self.notify(f"Unknown theme {self._theme_name!r} in [ui] theme; using {self.theme}.", severity="warning")
        # Everything alive now (the imported libraries, the widgets, the config) lives as long as the app:
        # frozen, the collector's full passes stop walking it. Under a log flood those passes ran every ~2 s
        # and held the event loop 0.2-0.3 s each on a loaded 2-core machine, which a key press waited behind
        # (tests/reliability/test_log_flood.py, the dashboard under a flood and a CPU hog). `on_unmount` thaws
        # them. No collection first: in a fresh `specdash` process one finds nothing here (0 objects, 28 ms),
        # and in a long-lived process that hosts the app (a test worker) it walked that whole heap (0.2 s).
        gc.freeze()
        self.session.subscribe(self._on_session_event)
        self._watch_session()
        if self._start_mode or self._autoplay:
            self._after_attach()

    def on_unmount(self) -> None:
        gc.unfreeze()

    @work(exclusive=True, group="session", name="session", exit_on_error=False)
    async def _watch_session(self) -> None:
        await self.session.run()

    async def action_quit(self) -> None:
        """Quit; while a sweep or a tune runs, first say what stops and what is kept, and ask."""
        if self.session.sweep_running() or self.session.tune_running() or self._touring:
            if isinstance(self.screen, ConfirmScreen):
                return

            def answered(ok: bool | None) -> None:
                if ok:
                    self.call_later(self._quit)

            self.push_screen(ConfirmScreen(self.dashboard.quit_question(), yes="Quit"), answered)
            return
        await self._quit()

    async def _quit(self) -> None:
        # The server keeps running; only our connection goes. Never let a dead link hold the quit key.
        try:
            await asyncio.wait_for(self.session.close(), timeout=3)
        except (SpecdashError, TimeoutError):
            pass
        self.exit(return_code=1 if self.connection_error is not None else 0)

    def _connection_failed(self, message: str) -> None:
        """The session could not connect (a host that cannot be resolved, refuses, rejects the key...): a
        question that stays until the user answers it, retry or quit; quitting exits non-zero."""
        self.connection_error = message
        label = self.session.label
        question = f"Cannot connect to {label}:\n{message}\n\nRetry, or quit (exit status 1)?"

        def answered(retry: bool | None) -> None:
            if retry:
                self.connection_error = None
                self._watch_session()
            else:
                self.call_later(self._quit)

        self.push_screen(ConfirmScreen(question, yes="Retry", no="Quit"), answered)

    def _on_session_event(self, event: SessionEvent | ConnectionEvent) -> None:
        # Called on the session's task; posting is all a listener may do (workers never touch widgets).
        # It also notes the milestones `start_mode` and autoplay wait for.
        if isinstance(event, Connected):
            self._connected.set()
        elif isinstance(event, ServerStatus):
            self.last_status = event
            if self._connected.is_set():
                self._attached.set()
        elif isinstance(event, ModesChanged):
            self._session_modes = event
        elif isinstance(event, TuneProgress):
            self.tune_progress = event
            if event.phase != "running":
                self._tune_countdown = None  # it ended: no time left to count
            elif event.eta_s is not None:
                # The runner's own estimate, refined from what it has measured, replaces the confirmation's: the
                # view shows one time left, never two that disagree.
                self._tune_countdown = (event.eta_s, self._clock())
            for screen in self.screen_stack:
                if isinstance(screen, TuneScreen):
                    screen.post_message(TuneUpdated(event))
            return
        message = to_message(event, self._log_mailbox)
        if message is not None:
            self.dashboard.takers.get(type(message), self.dashboard).post_message(message)

    # ---------------------------------------------------------------------------- start mode, autoplay

    @work(group="autoplay", name="autoplay", exit_on_error=False)
    async def _after_attach(self) -> None:
        # The first status after connecting is the session's answer to "is a run of ours live?"; acting on
        # Connected alone would race the attach and start a second server (which the session refuses).
        await self._attached.wait()
        if self._start_mode:
            if self.session.server_live():
                self.notify(f"A server is already running on {self.session.label}; not starting {self._start_mode}.")
            else:
                await self.session.start(self._start_mode)
        if self._autoplay:
            await self._tour()

    async def _tour(self) -> None:
        modes = [mode.name for mode in self._session_modes.modes[:2]]
        if len(modes) < 2:
            self.notify("Autoplay needs two modes in the config.", severity="warning")
            return
        self._touring = True
        levels = ", ".join(map(str, AUTOPLAY_LEVELS))
        self.call_later(self.dashboard.show_tour, modes)
        self.notify(f"Autoplay: {modes[0]} vs {modes[1]} at C={levels}. Any key stops the tour.", timeout=10)
        try:
            await self.session.sweep(modes, AUTOPLAY_LEVELS)
        finally:
            self._touring = False
            self.dashboard.end_tour()

    async def on_event(self, event: events.Event) -> None:
        if self._touring and isinstance(event, events.Key) and not event.is_forwarded:
            # The key that stops the tour does nothing else: a presenter grabbing the keyboard must not
            # also stop a server by accident.
            self._touring = False
            self.dashboard.touring = False
            self.workers.cancel_group(self, "autoplay")
            self.notify("Autoplay stopped: the server keeps running, finished levels are kept.")
            return
        await super().on_event(event)

    # --------------------------------------------------------------------------------------- workers

    def run_session_action(
        self, name: str, call: Callable[[], Coroutine[Any, Any, object]], group: str = "action"
    ) -> None:
        """Run one session action in a worker; its failure becomes a notification.

        Group `sweep` is exclusive (a sweep returns when it ends; a new one replaces it), `action` is not.
        """
        self.run_worker(call(), name=name, group=group, exclusive=group == "sweep", exit_on_error=False)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is WorkerState.ERROR:
            error = event.worker.error
            text = error.message if isinstance(error, SpecdashError) else f"{type(error).__name__}: {error}"
            if event.worker.group == "session" and not self._connected.is_set():
                self._connection_failed(text)  # nothing works without the host: not a toast that fades
            else:
                self.notify(text, title=f"{event.worker.name} failed", severity="error", timeout=10)
        if event.state in (WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.RUNNING):
            # The session's answers (server_live, sweep_running) may have changed: re-check the footer.
            self.dashboard.refresh_bindings()

    # ---------------------------------------------------------------------------------- help, palette

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.help_sections(), self.quit_note))

    def action_tune(self) -> None:
        if not any(isinstance(screen, TuneScreen) for screen in self.screen_stack):
            self._load_tune()

    @work(thread=True, exclusive=True, group="tune-view", exit_on_error=False)
    def _load_tune(self) -> None:
        # The newest journal is a small local file, but still read off the event loop; so is each entry's plan.
        report = None if self.tune_progress is not None else load_latest(Journal.default_dir())
        entries = tuple(self.tunes.entries()) if self.tunes is not None else ()
        estimate = self.tunes.estimate if self.tunes is not None else None
        screen = TuneScreen(
            report, entries, self.tune_progress, self.start_tune, estimate, self.tune_countdown, self._tick
        )
        self.call_from_thread(self.push_screen, screen)

    def start_tune(self, name: str, estimate: SweepEstimate | None = None) -> None:
        """Run the `[tune.NAME]` entry in a worker (the Tune view asked, after its confirmation, whose expected
        time the view then counts down)."""
        if self.tunes is not None:
            self._tune_countdown = (estimate.seconds if estimate is not None else None, self._clock())
            self.run_session_action(f"tune {name}", partial(self.tunes.run, name, self._on_session_event), group="tune")

    def tune_countdown(self) -> str:
        """The tune started here: its expected time left (`core.eta.countdown_text`); "" when none runs."""
        if self._tune_countdown is None:
            return ""
        expected, since = self._tune_countdown
        return countdown_text(expected, self._clock() - since)

    def cancel_tune(self) -> None:
        """Stop the running tune (the Tune view's `c`): nothing new starts."""
        if self.tunes is not None:
            self.run_session_action("cancel tune", self.tunes.cancel)

    def help_sections(self) -> list[tuple[str, list[HelpRow]]]:
        """Every binding, grouped, with the keys the keymap gives it."""
        sections = [(title, self._rows(bindings)) for title, bindings in DashboardScreen.HELP_SECTIONS]
        sections.append(
            (
                "App",
                [
                    *self._rows(APP_BINDINGS),
                    ("tab", "Next panel", "Move the focus to the next panel (shift+tab: the previous one)"),
                    ("ctrl+p", "Commands", "Every action, searchable, with its key"),
                ],
            )
        )
        return sections

    def _rows(self, bindings: Iterable[Binding]) -> list[HelpRow]:
        rows: list[HelpRow] = []
        mode_keys: list[str] = []
        for binding in bindings:
            keys = self._keymap.get(binding.id or "", binding.key)
            shown = ", ".join(self.get_key_display(Binding(key, "")) for key in keys.split(","))
            if (binding.id or "").startswith("select-mode-"):
                mode_keys.append(shown)  # nine rows saying the same thing become one
                continue
            rows.append((shown, binding.description, binding.tooltip))
        if mode_keys:
            keys = "1-9" if mode_keys == [str(n) for n in range(1, 10)] else " ".join(mode_keys)
            rows.insert(0, (keys, "Mode n", "Highlight the n-th mode in the list"))
        return rows

    def deliver_screenshot(
        self, filename: str | None = None, path: str | None = None, time_format: str | None = None
    ) -> str | None:
        """Textual's screenshot, saved to a directory that exists (Textual's default, `~/Downloads`, may not)."""
        from specdash.paths import screenshot_dir

        directory = Path(path) if path else self._screenshot_dir or screenshot_dir()
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self.notify(
                f"Cannot save a screenshot in {directory}: {exc.strerror}", title="Screenshot", severity="error"
            )
            return None
        return super().deliver_screenshot(filename, str(directory), time_format)

    def exit_summary(self) -> str | None:
        """What is still running on the host after we quit, and how to stop it (None: nothing of ours)."""
        status = self.last_status
        if status is None or status.phase.is_terminal:
            return None
        host = self.session.label
        pid = f" (pid {status.pid})" if status.pid is not None else ""
        port = f", port {status.port}" if status.port is not None else ""
        return (
            f"{status.mode or 'The server'}{pid} is still running on {host}{port} ({status.phase.value}).\n"
            f"Stop it with: specdash down {host}    Attach again with: specdash connect {host}"
        )

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        # Textual's own commands, less those that duplicate ours: its Quit skips the question a running sweep
        # asks, its Keys panel is our Help, its Maximize/Minimize our Zoom.
        for command in super().get_system_commands(screen):
            if command.title not in TEXTUAL_DUPLICATES:
                yield command
        dashboard = self.dashboard
        for _title, bindings in DashboardScreen.HELP_SECTIONS:
            for binding in bindings:
                name, _, _ = binding.action.partition("(")
                # Every action but the nine "highlight mode n" keys, and only those that apply now.
                if not (binding.id or "").startswith("select-mode-") and dashboard.check_action(name, ()):
                    yield SystemCommand(
                        self._titled(binding), binding.tooltip, partial(dashboard.run_action, binding.action)
                    )
        for binding in APP_BINDINGS:
            yield SystemCommand(self._titled(binding), binding.tooltip or "", partial(self.run_action, binding.action))

    def _titled(self, binding: Binding) -> str:
        """`Start  s`: a palette entry names its key (as the keymap sets it), so the palette teaches the keys."""
        keys = self._keymap.get(binding.id or "", binding.key)
        shown = ", ".join(self.get_key_display(Binding(key, "")) for key in keys.split(","))
        return f"{binding.description}  {shown}"


def make_app(
    session: Session,
    *,
    config_ui: UIConfig | None = None,
    keymap: Mapping[str, str] | None = None,
    clock: Callable[[], float] = time.time,
    live: bool = True,
    start_mode: str | None = None,
    autoplay: bool = False,
    quit_note: str = QUIT_KEEPS_SERVER,
    quit_stops_server: bool = False,
    screenshot_dir: Path | None = None,
    tunes: Tunes | None = None,
) -> SpecdashApp:
    """The dashboard as the CLI runs it (`live=True`), or frozen for tests: no clock tick, charts drawn at once.

    `start_mode` starts that mode once the session has attached, when no server is live (`connect --mode`);
    `autoplay` runs the presenter's tour (`demo --autoplay`): an A/B sweep of the first two modes.
    """
    return SpecdashApp(
        session,
        config_ui=config_ui,
        keymap=keymap,
        clock=clock,
        tick=1.0 if live else None,
        chart_interval=0.25 if live else 0.0,
        start_mode=start_mode,
        autoplay=autoplay,
        quit_note=quit_note,
        quit_stops_server=quit_stops_server,
        screenshot_dir=screenshot_dir,
        tunes=tunes,
    )
