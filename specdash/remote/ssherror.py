"""`SSHError`: the one error type the SSH layer lets out, with a `kind` callers can branch on."""

from __future__ import annotations

from enum import StrEnum

from specdash.errors import SpecdashError


class SSHErrorKind(StrEnum):
    """What went wrong at the SSH boundary."""

    UNREACHABLE = "unreachable"
    """TCP connect failed (refused, no route, reset); the message names host:port and the OS reason."""
    DNS = "dns"
    """The host name did not resolve."""
    TIMEOUT = "timeout"
    """Connecting (TCP + handshake + auth) took longer than the connect timeout."""
    AUTH = "auth"
    """The server refused every key we offered; the message lists them."""
    HOST_KEY_UNKNOWN = "host-key-unknown"
    """The host is not in known_hosts and accept-new was not asked for."""
    HOST_KEY_CHANGED = "host-key-changed"
    """known_hosts has a different key for the host: possibly a man-in-the-middle."""
    HOST_KEY_REJECTED = "host-key-rejected"
    """The host key failed verification for another reason (revoked, undecodable)."""
    JUMP = "jump"
    """Connecting to a jump host failed; `cause_kind` says how."""
    CONFIG = "config"
    """The SSH config or an identity file could not be read."""
    PROTOCOL = "protocol"
    """The server closed or broke the SSH session (disconnect, key exchange failure)."""
    LOST = "lost"
    """The connection dropped during an operation, or was not back in time."""
    COMMAND_TIMEOUT = "command-timeout"
    """A remote command did not finish within its timeout."""
    CHANNEL = "channel"
    """The server refused to open a session or forwarding channel."""
    CLOSED = "closed"
    """The host was closed by us, or never connected."""


# Retrying these cannot help without the user doing something, so the supervisor stops and reports Failed.
_PERMANENT = {
    SSHErrorKind.AUTH,
    SSHErrorKind.HOST_KEY_UNKNOWN,
    SSHErrorKind.HOST_KEY_CHANGED,
    SSHErrorKind.HOST_KEY_REJECTED,
    SSHErrorKind.CONFIG,
    SSHErrorKind.CLOSED,
}


class SSHError(SpecdashError):
    """A failure at the SSH boundary, with a message meant for the user.

    Attributes:
        kind: What went wrong.
        cause_kind: For `JUMP` errors, what went wrong with the jump host; otherwise equal to `kind`.
    """

    def __init__(self, kind: SSHErrorKind, message: str, *, cause_kind: SSHErrorKind | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.cause_kind = cause_kind or kind

    @property
    def permanent(self) -> bool:
        """True when retrying will fail the same way until the user changes something."""
        return self.cause_kind in _PERMANENT
