"""Parsing OpenSSH-style host strings: `[user@]host[:port]`, `[v6addr]:port`, optionally `ssh://`-prefixed.

Pure functions, no I/O. Whatever the string leaves out (user, port) stays `None` so that `~/.ssh/config`
(User, Port, HostName) can fill it in later, as it does for `ssh`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from specdash.errors import UsageError

# Host names, IPv4 and (bracketed or bare) IPv6 addresses with an optional %scope. A leading "-" is refused
# so that a host string can never be taken for an option by a command line we build from it.
_HOST = re.compile(r"^[A-Za-z0-9_.:%][A-Za-z0-9_.:%-]*$")
_USER = re.compile(r"^[^\s:/]+$")


@dataclass(frozen=True)
class Target:
    """Where to connect, as the user wrote it (before `~/.ssh/config` is applied)."""

    host: str
    """Host name, alias from `~/.ssh/config`, or address (IPv6 without brackets)."""
    user: str | None = None
    """Login name, or None to take it from the SSH config or the local user name."""
    port: int | None = None
    """TCP port, or None to take it from the SSH config (default 22)."""

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host and self.port is not None else self.host
        text = f"{self.user}@{host}" if self.user else host
        return f"{text}:{self.port}" if self.port is not None else text


def _bad(text: str, why: str) -> UsageError:
    return UsageError(f"bad host {text!r}: {why} (expected [user@]host[:port])")


def parse_port(value: str, *, text: str) -> int:
    """Parse a TCP port number; `text` is the whole input, named in the error."""
    if not value.isdigit() or not 1 <= int(value) <= 65535:
        raise _bad(text, f"port {value!r} is not a number from 1 to 65535")
    return int(value)


def parse_target(text: str) -> Target:
    """Parse `[ssh://][user@]host[:port]` (IPv6 as `[addr]:port` or a bare `addr`).

    Args:
        text: The host string as the user typed it.

    Returns:
        The parsed target; fields the string leaves out are None.

    Raises:
        UsageError: The string is empty or has a bad user, host or port; the message names the input.
    """
    rest = text.strip()
    if rest.startswith("ssh://"):
        rest = rest[len("ssh://") :].rstrip("/")
    if not rest:
        raise _bad(text, "it is empty")
    user: str | None = None
    if "@" in rest:
        # OpenSSH splits at the last "@"; a user name with "@" in it is rare but legal there, not here.
        user, _, rest = rest.rpartition("@")
        if not _USER.match(user):
            raise _bad(text, f"user {user!r} is empty or has spaces, ':' or '/' in it")
    port: int | None = None
    if rest.startswith("["):
        host, sep, tail = rest[1:].partition("]")
        if not sep:
            raise _bad(text, "missing ']' after an IPv6 address")
        if tail:
            if not tail.startswith(":"):
                raise _bad(text, f"unexpected {tail!r} after ']'")
            port = parse_port(tail[1:], text=text)
    elif rest.count(":") == 1:
        host, _, port_text = rest.partition(":")
        port = parse_port(port_text, text=text)
    else:
        # No colon, or a bare IPv6 address (several colons): no port in the string.
        host = rest
    if not host or not _HOST.match(host):
        raise _bad(text, f"host name {host!r} is empty, starts with '-' or has characters a host name cannot have")
    return Target(host=host, user=user, port=port)
