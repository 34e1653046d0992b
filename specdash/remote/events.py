"""Connection state of an `SSHHost`, reported as typed events (no Textual here; the UI wraps them).

Order over a host's life: `Connecting` -> `Connected` -> `Lost` -> (`Reconnecting` -> `Connecting`)+ ->
`Connected` ... and `Failed` once the supervisor gives up (a permanent error such as a changed host key).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from specdash.remote.ssherror import SSHError


class ConnectionState(StrEnum):
    """Where the supervised connection is now."""

    IDLE = "idle"
    """Not connected yet (`connect()` not called)."""
    CONNECTING = "connecting"
    """A connection attempt is under way."""
    CONNECTED = "connected"
    """Usable: commands, streams and forwards go through."""
    LOST = "lost"
    """The connection dropped; the supervisor will reconnect."""
    RECONNECTING = "reconnecting"
    """Waiting out the back-off before the next attempt."""
    FAILED = "failed"
    """Given up; `SSHHost.failure` says why."""
    CLOSED = "closed"
    """Closed by us."""


@dataclass(frozen=True)
class Connecting:
    """A connection attempt starts."""

    host: str
    """The host as the user named it."""
    attempt: int
    """1 for the first connect, then counts reconnect attempts since the last loss."""


@dataclass(frozen=True)
class Connected:
    """The connection is up (first time or again)."""

    host: str
    """The host as the user named it."""
    generation: int
    """1 for the first connection, +1 per reconnect; streams and forwards from older ones are gone."""


@dataclass(frozen=True)
class Lost:
    """An established connection dropped (keepalive timeout, reset, server gone)."""

    host: str
    """The host as the user named it."""
    reason: str
    """Why, as far as we know (e.g. `Keepalive timeout`, `Connection lost`)."""


@dataclass(frozen=True)
class Reconnecting:
    """The supervisor waits `delay` seconds, then tries again."""

    host: str
    """The host as the user named it."""
    attempt: int
    """The attempt about to be made (1-based, since the loss)."""
    delay: float
    """Back-off before that attempt, in seconds."""
    last_error: str | None
    """Why the previous attempt failed, or None for the first attempt after a loss."""


@dataclass(frozen=True)
class Failed:
    """Connecting failed for good (first connect, or a permanent error on reconnect)."""

    host: str
    """The host as the user named it."""
    error: SSHError
    """What went wrong; `error.message` is meant for the user."""


ConnectionEvent = Connecting | Connected | Lost | Reconnecting | Failed
"""Any of the events above."""
