"""The server panel: state, facts (mode, PID, port, uptime), startup progress with ETA, timeline, crash."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Label, Static

from specdash.core.events import ServerStatus
from specdash.core.status_text import eta_text, facts, progress_text, title
from specdash.phases import Phase
from specdash.ui.format import STATE_CLASSES, bar, duration, state_class, swap_class


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
        cls = state_class(status)
        swap_class(self, STATE_CLASSES, cls)
        state = self.query_one("#server-state", Label)
        state.update(title(status, stale=self.stale))
        swap_class(state, STATE_CLASSES, cls)
        self.query_one("#server-facts", Label).update(facts(status, now))

        starting = status.phase.is_startup
        self.query_one("#startup").display = starting
        if starting:
            counted = progress_text(status)
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
            left = status.leftovers
            cleanup = f"\n{len(left)} process(es) of its group still alive · [x] clean up" if left else ""
            crash.update(f"{status.crash.reason}\n[c] show it in the log{cleanup}")

        note = self.query_one("#note", Label)
        note.display = bool(status.note)
        note.update(status.note)
