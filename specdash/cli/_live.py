"""Headless viewing of a session: state changes as lines, a progress line, the crash excerpt.

Every line is derived from the session's `ServerStatus` by `specdash.core.status_text`, the same
functions the dashboard's panels use, so the terminal and the dashboard say the same thing.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from specdash.core.events import Notice, ServerStatus, SessionEvent
from specdash.core.status_text import headless_line, headless_progress, leftovers_text
from specdash.remote.events import Connecting, ConnectionEvent, Lost, Reconnecting


def fmt_seconds(seconds: float) -> str:
    """`75` -> `1m15s`, `8` -> `8s`."""
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class StatusPrinter:
    """A session listener that prints what a user waiting on a terminal wants to see.

    It starts with the first real state: `connecting to HOST`, then what the session found (attached,
    adopted) or did (launching); never a made-up `stopped` before anything was looked at.
    """

    def __init__(self, out: TextIO = sys.stdout, clock: Callable[[], float] = time.time, host: str = "") -> None:
        self.out = out
        self.clock = clock
        self.host = host
        self.tty = out.isatty()
        self._said = ""
        self._progress = ""
        self._leftovers = ""
        self.last: ServerStatus | None = None

    def __call__(self, event: SessionEvent | ConnectionEvent) -> None:
        if isinstance(event, ServerStatus):
            self._status(event)
        elif isinstance(event, Notice) and event.severity != "information":
            self._line(f"{event.severity}: {event.text}")
        elif isinstance(event, Notice) and event.text.startswith("sweep: "):
            self._line(event.text)  # which server (pid) the sweep measures, and whether it was restarted
        elif isinstance(event, Connecting) and event.attempt <= 1:
            self._line(f"connecting to {event.host}…")
        elif isinstance(event, Lost):
            self._line(f"connection lost: {event.reason}")
        elif isinstance(event, Reconnecting):
            self._line(f"reconnecting in {event.delay:.1f} s (attempt {event.attempt})")

    def _status(self, s: ServerStatus) -> None:
        self.last = s
        line = headless_line(s, self.clock())
        if line is None:
            return
        said = f"{s.phase}/{s.origin}/{s.pid}"
        if said != self._said:
            self._said = said
            self._line(line)
        if s.leftovers:
            text = leftovers_text(s, self.host or "HOST")
            if text != self._leftovers:
                self._leftovers = text
                self._line(text)
        text = headless_progress(s)
        if text and s.progress is not None and text != self._progress:
            self._progress = text
            if self.tty:
                self.out.write("\r" + text + "\x1b[K")
                self.out.flush()

    def _line(self, text: str) -> None:
        if self.tty and self._progress:
            self.out.write("\r\x1b[K")
        self.out.write(text + "\n")
        self.out.flush()
