"""Typed messages: each wraps one session event on its way to the dashboard's handlers.

The session's listener posts these and nothing else; handlers on the dashboard screen update widgets. Snapshot
events (status, modes, table and curves, GPU poll, connection state) replace an older one still in the queue,
so a busy UI only ever draws the newest; log batches and bench ticks carry data that must not be dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from specdash.core.events import BenchTick, BenchUpdate, GpuStats, LogBatch, ModesChanged, Notice, ServerStatus
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


@dataclass
class LogLines(Message, bubble=False):
    """New log lines (already batched ~4 times a second by the session)."""

    batch: LogBatch


@dataclass
class BenchTicked(Message, bubble=False):
    """A live throughput point."""

    tick: BenchTick


@dataclass
class NoticePosted(Message, bubble=False):
    """Something to tell the user once."""

    notice: Notice
