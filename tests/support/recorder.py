"""A session listener for tests: keeps every event with its arrival time, and waits on conditions."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from specdash.core.events import LogBatch, ServerStatus
from specdash.phases import Phase


class Recorder:
    """A session listener that keeps every event, with timestamps."""

    def __init__(self) -> None:
        self.events: list[object] = []
        self.times: list[float] = []
        self._arrived = asyncio.Event()

    def __call__(self, event: object) -> None:
        self.events.append(event)
        self.times.append(time.monotonic())
        self._arrived.set()

    async def wait_for(self, predicate: Callable[[list[object]], bool], timeout: float) -> None:
        """Wait (at most `timeout` s) until `predicate(events)` holds."""
        async with asyncio.timeout(timeout):
            while not predicate(self.events):
                self._arrived.clear()
                await self._arrived.wait()

    def first(self, kind: type, after: float = 0.0) -> tuple[object, float] | None:
        """The first event of `kind` recorded at or after monotonic time `after`."""
        for event, t in zip(self.events, self.times, strict=True):
            if isinstance(event, kind) and t >= after:
                return event, t
        return None

    def of(self, kind: type) -> list[object]:
        return [e for e in self.events if isinstance(e, kind)]

    def phases(self) -> list[Phase]:
        out: list[Phase] = []
        for e in self.events:
            if isinstance(e, ServerStatus) and (not out or out[-1] is not e.phase):
                out.append(e.phase)
        return out

    def log_lines(self) -> list[str]:
        return [line.text for e in self.events if isinstance(e, LogBatch) for line in e.lines]
