"""Typed messages: each wraps one session event on its way to the dashboard.

The session's listener posts these and nothing else: the live data (log lines, throughput ticks) straight to
the widget that shows it (`DashboardScreen.takers`), the rest to the dashboard screen, whose handlers update
widgets. Snapshot events (status, modes, table and curves, GPU poll, connection state) replace an older one
still in the queue, so a busy UI only ever draws the newest; log batches and bench ticks carry data that must
not be dropped. Log batches wait in a `LogMailbox` instead of the queue: a view slower than a log flood then
takes all that arrived in one go, and a key, a status or a crash notice never waits behind a queue of log
messages.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from textual.message import Message

from specdash.core.events import (
    BenchTick,
    BenchUpdate,
    GpuStats,
    GreedyUpdate,
    LogBatch,
    ModesChanged,
    Notice,
    ServerStatus,
    TuneProgress,
)
from specdash.remote.events import ConnectionEvent


class _Snapshot(Message, bubble=False):
    """A message whose newest copy is all that matters."""

    def can_replace(self, message: Message) -> bool:
        # Textual asks the queued message whether the one behind it supersedes it: same type means yes.
        return type(message) is type(self)


@dataclass
class StatusChanged(_Snapshot):
    """The server's state changed."""

    status: ServerStatus


@dataclass
class ModesUpdated(_Snapshot):
    """The configured modes, and which one runs."""

    modes: ModesChanged


@dataclass
class ConnectionChanged(_Snapshot):
    """The SSH connection changed state."""

    event: ConnectionEvent


@dataclass
class GpuUpdated(_Snapshot):
    """A new GPU poll."""

    stats: GpuStats


@dataclass
class BenchUpdated(_Snapshot):
    """The sweep's table and curves."""

    update: BenchUpdate


LINES_PER_TURN = 2_000
"""Log lines the log view shows per message: catching up with a long backlog (attaching to a server that
has logged for hours, or a flood on a busy machine) goes in slices, with keys and status between them."""


class LogMailbox:
    """Log batches on their way to the log view (about 4 a second from the session), coalesced: at most one
    `LogLines` message is in the view's queue at a time, and it takes what came meanwhile, up to
    `LINES_PER_TURN` lines (the taker posts another `LogLines` while `pending`). Nothing is dropped but what a
    reset (a new run) clears anyway."""

    def __init__(self) -> None:
        self._batches: deque[LogBatch] = deque()
        self._told = False

    @property
    def pending(self) -> bool:
        """Lines are still waiting after a `take`."""
        return bool(self._batches)

    def put(self, batch: LogBatch) -> bool:
        """Keep `batch`; True when the view must be told (no `LogLines` is waiting for it)."""
        if batch.reset:
            self._batches.clear()
        self._batches.append(batch)
        told, self._told = self._told, True
        return not told

    def take(self, limit: int = LINES_PER_TURN) -> list[LogBatch]:
        """The oldest batches waiting, `limit` lines at most (a batch is cut if need be); when nothing is left
        the next `put` tells the view again."""
        taken: list[LogBatch] = []
        room = limit
        while self._batches and room > 0:
            batch = self._batches.popleft()
            if len(batch.lines) > room:
                head, tail = _cut(batch, room)
                self._batches.appendleft(tail)
                batch = head
            taken.append(batch)
            room -= len(batch.lines)
        self._told = bool(self._batches)
        return taken


def _cut(batch: LogBatch, n: int) -> tuple[LogBatch, LogBatch]:
    """The first `n` lines of `batch` (with its reset) and the rest."""
    return LogBatch(batch.lines[:n], reset=batch.reset), LogBatch(batch.lines[n:])


@dataclass
class LogLines(Message):
    """Log batches are waiting in `mailbox`. Posted to the log view itself, which shows them; it then bubbles
    to the panel around it, which updates its status line."""

    mailbox: LogMailbox


@dataclass
class BenchTicked(Message):
    """A live throughput point. Posted to the live chart itself; it then bubbles to the sweep panel (which
    grows from its hint)."""

    tick: BenchTick


@dataclass
class GreedyUpdated(_Snapshot):
    """The greedy spot check started, ended, or has nothing to compare yet."""

    update: GreedyUpdate


@dataclass
class NoticePosted(Message, bubble=False):
    """Something to tell the user once."""

    notice: Notice


@dataclass
class TuneUpdated(_Snapshot):
    """A tune started from the dashboard took a step (or ended). Posted to the Tune view when it is open."""

    progress: TuneProgress
