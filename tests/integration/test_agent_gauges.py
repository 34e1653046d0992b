"""The agent's read of its server's `/metrics` (`specdash.bench.agent.main._get_text`, the stdlib's client in a
thread), over real loopback sockets against servers that answer well, keep the connection open, send a chunked
body, answer 404, redirect elsewhere, babble or say nothing: a poll either gets the body or is skipped, and never
waits past its time limit."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import pytest

from specdash.bench.agent.main import _get_text
from specdash.bench.gauges import read_gauges

BODY = b'sglang:num_running_reqs{tp_rank="0"} 7\nsglang:num_queue_reqs 2\n'
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Coroutine[Any, Any, None]]


@asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()


async def _request(reader: asyncio.StreamReader) -> bytes:
    return await reader.readuntil(b"\r\n\r\n")


async def keeps_open(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    head = await _request(reader)
    assert head.startswith(b"GET /metrics HTTP/1.1\r\n") and b"User-Agent: specdash-agent" in head
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY))
    await writer.drain()
    await asyncio.sleep(30)  # ignores the client's "Connection: close": the Content-Length ends the read


async def closes(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _request(reader)
    writer.write(b"HTTP/1.0 200 OK\r\n\r\n" + BODY)
    await writer.drain()
    writer.close()


def answering(head: bytes, then_sleep: float = 0.0) -> Handler:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(head)
        await writer.drain()
        await asyncio.sleep(then_sleep)
        writer.close()

    return handler


async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await asyncio.sleep(30)


async def chunked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _request(reader)
    half = len(BODY) // 2
    writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    for part in (BODY[:half], BODY[half:]):
        writer.write(b"%x\r\n%s\r\n" % (len(part), part))
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    writer.close()


@pytest.mark.parametrize("handler", [keeps_open, closes, chunked], ids=["keeps-open", "closes", "chunked"])
async def test_a_poll_reads_the_body_without_waiting_for_its_time_limit(handler: Handler) -> None:
    async with serving(handler) as url:
        began = time.monotonic()
        text = await _get_text(url, "/metrics", 5.0)
        took = time.monotonic() - began
    assert text is not None and read_gauges(text) == {"sglang:num_running_reqs": 7.0, "sglang:num_queue_reqs": 2.0}
    assert took < 4.0, took  # done at the body's end, not at the 5 s limit


@pytest.mark.parametrize(
    "handler",
    [
        answering(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"),
        answering(b"garbage without a head\r\n\r\n"),
        silent,
    ],
    ids=["404", "garbage", "silent"],
)
async def test_a_poll_that_gets_no_usable_body_is_skipped_within_its_limit(handler: Handler) -> None:
    async with serving(handler) as url:
        began = time.monotonic()
        text = await _get_text(url, "/metrics", 1.0)
        took = time.monotonic() - began
    assert text is None
    assert took < 3.0, took


async def test_a_redirect_is_not_followed() -> None:
    """Even to a server that would answer: a redirect could lead off the host, so the poll is skipped."""
    async with serving(closes) as elsewhere:
        go = f"HTTP/1.1 302 Found\r\nLocation: {elsewhere}/metrics\r\nContent-Length: 0\r\n\r\n".encode()
        async with serving(answering(go)) as url:
            assert await _get_text(elsewhere, "/metrics", 2.0) is not None  # it would have answered
            assert await _get_text(url, "/metrics", 2.0) is None


async def test_no_server_is_a_skipped_poll() -> None:
    async with serving(closes) as url:
        pass  # closed: nothing listens there now
    assert await _get_text(url, "/metrics", 1.0) is None
