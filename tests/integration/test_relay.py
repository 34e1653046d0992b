"""The WAN rig's delaying relay (tests/support/relay.py) over real loopback sockets: bytes intact and in order, every
chunk held at least `delay - jitter` each way, jitter never reordering, EOF carried through.

Only lower bounds on time are asserted (a loaded machine can only make things later).
"""

from __future__ import annotations

import asyncio
import time

from tests.support.relay import Relay


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
    writer.write_eof()
    await writer.drain()
    writer.close()


async def test_relay_keeps_order_and_delays_every_chunk_each_way() -> None:
    echo = await asyncio.start_server(_echo, "127.0.0.1", 0)
    port = echo.sockets[0].getsockname()[1]
    # Jitter close to the delay: without the order rule, chunks would overtake each other often.
    async with Relay("127.0.0.1", port, delay_s=0.020, jitter_s=0.015, record=True, seed=7) as relay:
        reader, writer = await asyncio.open_connection("127.0.0.1", relay.port)
        sent = bytearray()
        got = bytearray()

        async def read_all() -> None:
            while data := await reader.read(65536):
                got.extend(data)

        receiver = asyncio.create_task(read_all())
        for i in range(300):
            msg = f"{i:05d};".encode() * (1 + i % 7)
            sent.extend(msg)
            writer.write(msg)
            await writer.drain()
            if i % 10 == 0:
                await asyncio.sleep(0.003)  # let some writes go out as chunks of their own
        writer.write_eof()
        async with asyncio.timeout(30):
            await receiver
        writer.close()
    echo.close()
    assert bytes(got) == bytes(sent)  # nothing lost, nothing reordered, EOF carried both ways
    assert relay.connections == 1
    for direction in ("up", "down"):
        hops = [h for h in relay.hops if h.direction == direction]
        assert len(hops) > 5, direction
        assert sum(h.size for h in hops) == len(sent)
        assert all(h.sent - h.arrived >= 0.020 - 0.015 - 1e-6 for h in hops)
        dues = [h.due for h in hops]
        assert dues == sorted(dues)  # jitter never lets a chunk pass the one before it
        assert all(h.sent >= h.due - 1e-3 for h in hops)


async def test_a_round_trip_through_the_relay_takes_at_least_twice_the_one_way_delay() -> None:
    echo = await asyncio.start_server(_echo, "127.0.0.1", 0)
    port = echo.sockets[0].getsockname()[1]
    async with Relay("127.0.0.1", port, delay_s=0.040, jitter_s=0.004) as relay:
        reader, writer = await asyncio.open_connection("127.0.0.1", relay.port)
        rtts = []
        for _ in range(5):
            t0 = time.perf_counter()
            writer.write(b"ping")
            await writer.drain()
            async with asyncio.timeout(10):
                assert await reader.readexactly(4) == b"ping"
            rtts.append(time.perf_counter() - t0)
        writer.close()
    echo.close()
    assert min(rtts) >= 2 * (0.040 - 0.004)


async def test_a_refused_target_closes_the_client_side() -> None:
    probe = await asyncio.start_server(_echo, "127.0.0.1", 0)
    dead_port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    async with Relay("127.0.0.1", dead_port) as relay:
        reader, writer = await asyncio.open_connection("127.0.0.1", relay.port)
        async with asyncio.timeout(10):
            assert await reader.read() == b""
        writer.close()
    assert relay.connections == 0
