"""The top line: host, connection state (with a reconnect countdown), engine and mode, server state."""

from __future__ import annotations

import math
from collections.abc import Callable

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.reactive import reactive
from textual.widgets import Label

from specdash.core.events import ServerStatus
from specdash.core.status_text import badge
from specdash.remote.events import Connected, Connecting, ConnectionEvent, Failed, Lost, Reconnecting
from specdash.ui.format import STATE_CLASSES, state_class, swap_class

CONNECTION_CLASSES = ("-connecting", "-connected", "-lost", "-failed")


def connection_text(event: ConnectionEvent | None, now: float, deadline: float | None) -> tuple[str, str]:
    """What the header says about the connection, and the CSS class that colours it."""
    match event:
        case None:
            return "○ not connected yet", "-connecting"
        case Connecting(attempt=attempt):
            return ("◌ connecting…" if attempt <= 1 else f"◌ connecting (attempt {attempt})…"), "-connecting"
        case Connected():
            return "● connected", "-connected"
        case Lost(reason=reason):
            return f"✖ lost: {reason}", "-lost"
        case Reconnecting(attempt=attempt):
            left = max(0, math.ceil((deadline or now) - now))
            return f"✖ lost · reconnecting in {left}s (attempt {attempt})", "-lost"
        case Failed(error=error):
            return f"✖ failed: {error.message}", "-failed"
    return "", "-connecting"  # pragma: no cover - the match is exhaustive


class StatusHeader(Horizontal):
    """One line that answers: which host, can I reach it, what runs there and in which state."""

    connection: reactive[ConnectionEvent | None] = reactive(None, init=False)
    """The latest connection event."""

    status: reactive[ServerStatus | None] = reactive(None, init=False)
    """The latest server status."""

    now: reactive[float] = reactive(0.0, init=False)
    """The clock, ticked once a second so the reconnect countdown moves."""

    def __init__(self, label: str, clock: Callable[[], float], *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self._label = label
        self._clock = clock
        self._deadline: float | None = None

    def compose(self) -> ComposeResult:
        yield Label("specdash", id="brand")
        yield Label(self._label, id="host", markup=False)
        yield Label("", id="connection", markup=False)
        yield Label("", id="engine", markup=False)
        yield Label("", id="server-state-badge", markup=False)

    _children_ready = False

    def on_mount(self) -> None:
        # `is_mounted` is still False inside on_mount, so the children's existence is tracked here.
        self._children_ready = True
        self.now = self._clock()
        self._update()

    def watch_connection(self, event: ConnectionEvent | None) -> None:
        if isinstance(event, Reconnecting):
            self._deadline = self._clock() + event.delay
            self.now = self._clock()
        self._update()

    def watch_status(self) -> None:
        self._update()

    def watch_now(self) -> None:
        if isinstance(self.connection, Reconnecting):
            self._update()

    def _update(self) -> None:
        if not self._children_ready:
            return  # watchers fire before on_mount; on_mount draws the first state
        text, cls = connection_text(self.connection, self.now, self._deadline)
        conn = self.query_one("#connection", Label)
        conn.update(text)
        swap_class(conn, CONNECTION_CLASSES, cls)
        status = self.status
        engine = self.query_one("#engine", Label)
        badge_label = self.query_one("#server-state-badge", Label)
        stale = status is not None and not isinstance(self.connection, Connected)
        text, _ = badge(status, stale=stale)
        engine.update(" · ".join(part for part in (status.engine, status.mode) if part) if status else "")
        badge_label.update(text)
        swap_class(badge_label, STATE_CLASSES, state_class(status))
        badge_label.set_class(stale, "-stale")
