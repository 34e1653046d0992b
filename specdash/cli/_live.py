"""Headless viewing of a session: phase changes as lines, a progress line, the crash excerpt."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from specdash.core.events import Notice, ServerStatus, SessionEvent
from specdash.core.models import Phase
from specdash.remote.events import ConnectionEvent, Lost, Reconnecting


def fmt_seconds(seconds: float) -> str:
    """`75` -> `1m15s`, `8` -> `8s`."""
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class StatusPrinter:
    """A session listener that prints what a user waiting on a terminal wants to see."""

    def __init__(self, out: TextIO = sys.stdout, clock: Callable[[], float] = time.time) -> None:
        self.out = out
        self.clock = clock
        self.tty = out.isatty()
        self._phase: Phase | None = None
        self._progress = ""
        self.last: ServerStatus | None = None

    def __call__(self, event: SessionEvent | ConnectionEvent) -> None:
        if isinstance(event, ServerStatus):
            self._status(event)
        elif isinstance(event, Notice) and event.severity != "information":
            self._line(f"{event.severity}: {event.text}")
        elif isinstance(event, Lost):
            self._line(f"connection lost: {event.reason}")
        elif isinstance(event, Reconnecting):
            self._line(f"reconnecting in {event.delay:.1f} s (attempt {event.attempt})")

    def _status(self, s: ServerStatus) -> None:
        self.last = s
        elapsed = self.clock() - s.started_at if s.started_at else 0.0
        if s.phase is not self._phase:
            self._phase = s.phase
            extra = f" ({s.note})" if s.note else ""
            self._line(f"[{fmt_seconds(elapsed):>6}] {s.phase.value}{extra}")
        if s.phase.is_startup and s.progress is not None and s.progress.total:
            eta = f"ETA {fmt_seconds(s.eta_remaining)}" if s.eta_remaining is not None else "ETA: no history yet"
            text = f"         {s.progress.done}/{s.progress.total} {s.progress.unit} {s.progress.fraction:4.0%}  {eta}"
            if text != self._progress:
                self._progress = text
                if self.tty:
                    self.out.write("\r" + text + "\x1b[K")
                    self.out.flush()

    def _line(self, text: str) -> None:
        if self.tty and self._progress:
            self.out.write("\r\x1b[K")
        self.out.write(text + "\n")
        self.out.flush()
