"""An order-preserving delaying TCP relay: a WAN link's latency for the tests (this kernel has no netem).

Each chunk read from one side is written to the other `delay ± jitter` seconds after it arrived, in both
directions. Jitter never reorders: a chunk is due no earlier than the one before it (a TCP stream is
ordered, so a late segment holds back the ones behind it, as on a real path). The rate limit is not ours:
the rig puts a `tbf` qdisc on the veth (tests/support/wan.py).

In-process (`async with Relay(...)`) for its own tests, or as a process of its own for the rig and the
benchmarks, so its CPU is not charged to the client under test:

    python -m tests.support.relay --target 10.99.1.2:22 --delay 0.040 --jitter 0.004   # prints "port N", then relays

A bounded queue per direction (`max_chunks`) gives back-pressure: a reader stops reading when the far
side's writer is that far behind.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import signal
import sys
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

READ_SIZE = 65536


@dataclass
class Hop:
    """One chunk's passage through the relay (kept only when `Relay(record=True)`)."""

    direction: str
    """`up` (client to target) or `down`."""
    size: int
    arrived: float
    """Loop time the chunk was read."""
    due: float
    """Loop time it was scheduled for."""
    sent: float = 0.0
    """Loop time it was written."""


@dataclass
class Relay:
    """Listens on `listen_host:port` (0: any free port) and relays every connection to `target`."""

    target_host: str
    target_port: int
    delay_s: float = 0.040
    jitter_s: float = 0.004
    listen_host: str = "127.0.0.1"
    listen_port: int = 0
    seed: int = 0
    max_chunks: int = 1024
    record: bool = False
    hops: list[Hop] = field(default_factory=list)
    """Every chunk relayed, in order per direction (with `record`)."""
    connections: int = 0
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        if self.jitter_s < 0 or self.delay_s < self.jitter_s:
            raise ValueError(f"need delay >= jitter >= 0, got {self.delay_s} ± {self.jitter_s}")
        self._rng = random.Random(self.seed)

    @property
    def port(self) -> int:
        """The port it listens on."""
        assert self._server is not None, "relay not started"
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> Relay:
        """Start listening."""
        self._server = await asyncio.start_server(self._accept, self.listen_host, self.listen_port)
        return self

    async def close(self) -> None:
        """Stop listening and drop every relayed connection."""
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> Relay:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _accept(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        try:
            t_reader, t_writer = await asyncio.open_connection(self.target_host, self.target_port)
        except OSError:
            c_writer.close()
            return
        self.connections += 1
        up = self._spawn(self._direction("up", c_reader, t_writer))
        down = self._spawn(self._direction("down", t_reader, c_writer))
        try:
            await asyncio.gather(up, down, return_exceptions=True)
        finally:
            for w in (c_writer, t_writer):
                w.close()

    def _due(self, now: float, last: float) -> float:
        return max(now + self.delay_s + self._rng.uniform(-self.jitter_s, self.jitter_s), last)

    async def _direction(self, name: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Read chunks as they come; a second task writes each when due (order kept)."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes, Hop | None]] = asyncio.Queue(self.max_chunks)

        async def send() -> None:
            while True:
                due, data, hop = await queue.get()
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                writer.write(data)
                if hop is not None:
                    hop.sent = loop.time()
                await writer.drain()

        sender = asyncio.ensure_future(send())
        last = 0.0
        try:
            while True:
                try:
                    data = await reader.read(READ_SIZE)
                except OSError:
                    data = b""
                now = loop.time()
                last = self._due(now, last)
                hop = None
                if self.record and data:
                    hop = Hop(name, len(data), now, last)
                    self.hops.append(hop)
                await queue.put((last, data, hop))
                if not data:
                    break
            await sender
        except (OSError, asyncio.CancelledError):
            sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)
            raise


async def _serve(args: argparse.Namespace) -> None:
    host, _, port = args.target.rpartition(":")
    relay = Relay(host, int(port), args.delay, args.jitter, args.listen, args.port, args.seed)
    await relay.start()
    print(f"port {relay.port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await relay.close()


def main(argv: list[str] | None = None) -> None:
    """`python -m tests.support.relay` (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m tests.support.relay")
    parser.add_argument("--target", required=True, help="HOST:PORT to relay to")
    parser.add_argument("--delay", type=float, default=0.040, help="seconds each way (default 0.040)")
    parser.add_argument("--jitter", type=float, default=0.004, help="± seconds, uniform (default 0.004)")
    parser.add_argument("--listen", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        asyncio.run(_serve(args))
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
