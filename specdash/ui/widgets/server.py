"""The server panel: state, facts (mode, PID, port, uptime), startup progress with ETA, timeline, crash."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Label, Static

from specdash.core.events import ServerStatus
from specdash.core.models import Phase, Progress
from specdash.ui.format import STATE_CLASSES, bar, duration, state_class, swap_class

STATE_ICONS = {"-ready": "●", "-starting": "◐", "-crashed": "✖", "-stopping": "◑", "-stopped": "○"}


def progress_text(phase: Phase, progress: Progress | None) -> str:
    """`shard 29/64`, `batch sizes 12/36`: the unit the engine counts in this phase."""
    if progress is None:
        return ""
    unit = progress.unit or ("shard" if phase is Phase.LOADING_WEIGHTS else "batch sizes")
    return f"{unit} {progress.done}/{progress.total}"


def eta_text(status: ServerStatus, now: float) -> str:
    """`elapsed 1m 12s · ready in ~2m 05s (5 startups)`, or says there is no history yet."""
    elapsed = duration(now - status.started_at) if status.started_at is not None else "-"
    if status.eta_remaining is None:
        return f"elapsed {elapsed} · ETA: no history yet"
    samples = f" (from {status.eta_samples} startup{'s' if status.eta_samples != 1 else ''})"
    return f"elapsed {elapsed} · ready in ~{duration(status.eta_remaining)}{samples if status.eta_samples else ''}"


def timeline_text(status: ServerStatus) -> str:
    """Finished phases with their durations: `launching 2s › loading weights 1m 40s`.

    Once the server is up, one line is enough: the total and the slowest phase (where time went).
    """
    if status.phase is Phase.READY and status.timeline:
        total = sum(seconds for _, seconds in status.timeline)
        slowest, seconds = max(status.timeline, key=lambda item: item[1])
        return f"startup {duration(total)} ({slowest.value} {duration(seconds)})"
    return " › ".join(f"{phase.value} {duration(seconds)}" for phase, seconds in status.timeline)


class PhaseBar(Static):
    """A progress bar drawn from text (Textual's ProgressBar runs an ETA timer that would race snapshots)."""

    COMPONENT_CLASSES = {"phase-bar--done", "phase-bar--todo"}

    DEFAULT_CSS = """
    PhaseBar {
        height: 1;
        & > .phase-bar--done { color: $warning; }
        & > .phase-bar--todo { color: $panel-lighten-2; }
    }
    """

    fraction: reactive[float] = reactive(0.0)
    """How much of the current phase is done, 0 to 1."""

    def validate_fraction(self, fraction: float) -> float:
        return max(0.0, min(1.0, fraction))

    def render(self) -> Text:
        filled, empty = bar(self.fraction, max(1, self.size.width - 5))
        text = Text(no_wrap=True)
        text.append(filled, self.get_component_rich_style("phase-bar--done"))
        text.append(empty, self.get_component_rich_style("phase-bar--todo"))
        text.append(f" {self.fraction * 100:3.0f}%")
        return text


class ServerPanel(Vertical):
    """Everything about the one server: fed a `ServerStatus` snapshot and a clock tick."""

    status: reactive[ServerStatus] = reactive(ServerStatus(Phase.STOPPED), init=False)
    """The latest status snapshot from the session."""

    now: reactive[float] = reactive(0.0, init=False)
    """The clock (epoch seconds) for uptime and elapsed; ticked once a second by the screen."""

    stale: reactive[bool] = reactive(False, init=False)
    """True while the connection is down: the status is only the last thing we heard, and says so."""

    def compose(self) -> ComposeResult:
        yield Label("", id="server-state", markup=False)
        yield Label("", id="server-facts", markup=False)
        with Vertical(id="startup"):
            yield Label("", id="phase", markup=False)
            yield PhaseBar(id="phase-bar")
            yield Label("", id="eta", markup=False)
        yield Label("", id="timeline", markup=False)
        yield Label("", id="crash", markup=False)
        yield Label("", id="note", markup=False)

    _children_ready = False

    def on_mount(self) -> None:
        # `is_mounted` is still False inside on_mount, so the children's existence is tracked here.
        self._children_ready = True
        self.border_title = "Server"
        self._update()

    def watch_status(self) -> None:
        self._update()

    def watch_stale(self, stale: bool) -> None:
        self.set_class(stale, "-stale")
        self._update()

    def watch_now(self) -> None:
        if self.status.started_at is not None and not self.status.phase.is_terminal:
            self._update()

    def _update(self) -> None:
        if not self._children_ready:
            return  # watchers fire before on_mount; on_mount draws the first state
        status, now = self.status, self.now
        cls = state_class(status.phase)
        swap_class(self, STATE_CLASSES, cls)
        state = self.query_one("#server-state", Label)
        last_known = "  (last known: no connection)" if self.stale else ""
        state.update(f"{STATE_ICONS[cls]} {status.phase.value.upper()}{last_known}")
        swap_class(state, STATE_CLASSES, cls)
        self.query_one("#server-facts", Label).update(self._facts(status, now))

        starting = status.phase.is_startup
        self.query_one("#startup").display = starting
        if starting:
            counted = progress_text(status.phase, status.progress)
            in_phase = duration(now - status.phase_started_at) if status.phase_started_at is not None else ""
            phase_line = "  ".join(part for part in (status.phase.value, counted, in_phase) if part)
            self.query_one("#phase", Label).update(phase_line)
            phase_bar = self.query_one(PhaseBar)
            phase_bar.display = status.progress is not None
            phase_bar.fraction = status.progress.fraction if status.progress else 0.0
            self.query_one("#eta", Label).update(eta_text(status, now))

        timeline = self.query_one("#timeline", Label)
        timeline.display = bool(status.timeline)
        timeline.update(timeline_text(status))

        crash = self.query_one("#crash", Label)
        crash.display = status.crash is not None
        if status.crash is not None:
            crash.update(f"{status.crash.reason}\n[c] show it in the log")

        note = self.query_one("#note", Label)
        note.display = bool(status.note)
        note.update(status.note)

    @staticmethod
    def _facts(status: ServerStatus, now: float) -> str:
        parts = []
        if status.mode:
            parts.append(status.mode)  # the engine is in the header
        if status.pid is not None:
            parts.append(f"pid {status.pid}")
        if status.port is not None:
            parts.append(f"port {status.port}")
        if status.phase is Phase.READY and status.started_at is not None:
            parts.append(f"up {duration(now - status.started_at)}")
        return " · ".join(parts) or "no server of ours on this host"
