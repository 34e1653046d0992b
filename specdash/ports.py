"""A local TCP port that is free now, for what specdash starts on this machine (the demo's simulator). The tests
take theirs from `tests/support/ports.py`, which keeps parallel workers apart."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on `host` that nothing listened on a moment ago (the caller's server binds it right after)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
