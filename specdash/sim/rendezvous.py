"""The collectives that hold the nodes of a multi-node server together (`--nnodes` > 1).

Real TP ranks on several nodes meet in collectives: the rendezvous of `init_process_group` (torch's TCPStore on
`--dist-init-addr`, served by the head node) and, after the weights, the all-reduce of the free memory that sizes
the KV cache. A rank that gets there first waits for the slowest one, so a slow node holds the whole server back.
The simulator does the same over TCP: the head node's main process serves `Rendezvous` on the `--dist-init-addr`
port; every rank process `meet`s there (one line with the collective's name, `go` back once every rank of the
server has arrived). With one node there is nothing to meet: `meet` returns at once.

Not SGLang's protocol (that is torch's TCPStore and NCCL): only its timing, which is what specdash sees.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import time

CONNECT_TIMEOUT_S = 600.0
"""How long a rank keeps trying to reach the head's store (torch's own default is far longer)."""


class Rendezvous:
    """The head node's store: releases each named collective once `size` ranks have arrived."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._arrived: dict[str, int] = {}
        self._released: dict[str, asyncio.Event] = {}
        self.server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> None:
        """Listen on `host:port` (OSError when it cannot, as TCPStore's EADDRINUSE)."""
        self.server = await asyncio.start_server(self._handle, host, port, reuse_address=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            name = (await reader.readline()).decode(errors="replace").strip()[:64]
            if not name:
                return
            released = self._released.setdefault(name, asyncio.Event())
            self._arrived[name] = self._arrived.get(name, 0) + 1
            if self._arrived[name] >= self.size:
                released.set()
            await released.wait()
            writer.write(b"go\n")
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


def meet(addr: str | None, name: str, nnodes: int) -> None:
    """Block until every rank of the server has reached collective `name` (a no-op on one node).

    A head that cannot be reached for CONNECT_TIMEOUT_S, or that goes away while we wait, ends this rank
    (exit status 1), as a lost store does in torch."""
    if nnodes <= 1 or not addr:
        return
    host, _, port = addr.rpartition(":")
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    while True:
        try:
            sock = socket.create_connection((host.strip("[]"), int(port)), timeout=5.0)
            break
        except OSError:
            if time.monotonic() > deadline:
                sys.exit(1)
            time.sleep(0.1)  # the head's store is not up yet: ranks start in any order
    with sock:
        sock.settimeout(None)  # as long as the slowest rank takes
        sock.sendall(f"{name}\n".encode())
        answer = sock.makefile("rb").readline()
    if answer.strip() != b"go":
        sys.exit(1)
