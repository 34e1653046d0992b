"""Ports for the tests' own servers (sshd, simulators, listeners).

`specdash.ports.free_port` asks the kernel for a port (bind to 0) and lets it go; the product's caller binds it
a moment later. In the suite a port is often chosen seconds before it is bound (a mode's port is written into a
config and bound only when the mode starts), and two xdist workers ask the same kernel: the CI run of 2026-12-05
lost a test when another worker's server took such a port in between (`PortBusy: port 44055`). So the tests
take their ports here instead. Each worker walks a block of its own below the kernel's ephemeral range (which
the kernel never hands out for a bind to 0 or for an outgoing connection) and below the ports the product picks
for its own demo (`specdash.ports.TESTS_BELOW`: a `specdash tune demo` a test starts cannot take a port a test
was given), does not hand a port out twice until its block is used up, and skips any port something on the
machine holds now.
"""

from __future__ import annotations

import os

from specdash.ports import TESTS_BELOW, ephemeral_low, is_free

_FLOOR = 10000


def _block() -> range:
    """This worker's ports: its share of [_FLOOR, the product's demo ports or the ephemeral range's first port)."""
    count = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    high = max(min(TESTS_BELOW, ephemeral_low()), _FLOOR + 2000)
    size = (high - _FLOOR) // count
    start = _FLOOR + (index % count) * size
    return range(start, start + size)


_BLOCK = _block()
_next = 0


def free_port(host: str = "127.0.0.1") -> int:
    """A port of this worker's block that no test of this worker was given before and nothing holds now."""
    global _next
    for _ in range(len(_BLOCK)):
        port = _BLOCK[_next % len(_BLOCK)]
        _next += 1
        if is_free(host, port):
            return port
    raise RuntimeError(f"no free port left in {_BLOCK.start}-{_BLOCK.stop - 1} for this test worker")
