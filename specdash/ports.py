"""A local TCP port that is free now, for what specdash starts on this machine (the demo's simulator). The tests
take theirs from `tests/support/ports.py`, which keeps parallel workers apart.

The port is chosen below the kernel's ephemeral range, not by a bind to port 0. A demo's port is bound again and
again (the tune restarts the simulator once per setting), and between two starts nothing listens on it: a port
from the ephemeral range can then be taken by any outgoing connection of the machine (a browser, ssh, the
tune's own client), and the next start fails with `[Errno 98] address already in use`. A CI run of the suite
lost `specdash tune demo`'s baseline that way (2026-12-06, port 38141). The kernel never hands out a port below
the range for a bind to 0 or a connect, so only a server that asks for that very port can collide with us.
"""

from __future__ import annotations

import errno
import random
import socket
from pathlib import Path

TESTS_BELOW = 20000
"""Ports from here up to the ephemeral range are the product's; the test suite takes its own from below."""

_TRIES = 64


def ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (`net.ipv4.ip_local_port_range`; 32768 when unreadable)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def is_free(host: str, port: int) -> bool:
    """Whether a listening socket could bind `host:port` now (an address not on this machine counts as free:
    the test suite's network namespaces)."""
    with socket.socket() as sock:  # no SO_REUSEADDR: a port with connections in TIME_WAIT counts as held
        try:
            sock.bind((host, port))
        except OSError as err:
            return err.errno == errno.EADDRNOTAVAIL
        return True


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on `host` below the ephemeral range that nothing holds now (the caller's server binds it).

    Falls back to a port from the kernel (bind to 0) when the range below is too small to search or full.
    """
    low, high = TESTS_BELOW, ephemeral_low()
    if high - low >= _TRIES:
        for port in random.sample(range(low, high), _TRIES):  # noqa: S311 - a port, not a secret
            if is_free(host, port):
                return port
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
