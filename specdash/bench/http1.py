"""A minimal HTTP/1.1 streaming client on asyncio protocols: the probe's data plane.

Why not aiohttp here: reading a stream through `resp.content.iter_any()` wakes the reading task once per
socket read, and with one SSE event per read (10 ms pacing, K=1) that wake-up dominates the client's CPU:
in `benchmarks/probe_cost.py` an aiohttp reader cost as much per event as a plain aiohttp client (~0.9x),
far above the ≤ 0.7x-of-bench_serving bar. Here each read is handled synchronously in the protocol's
`buffer_updated` (stamped with `perf_counter_ns()` on entry, before any parsing): de-chunked, SSE-split and
accounted without waking anything; the request's task wakes once, at the end of the response.

Scope, deliberately small: POST with a pre-serialised body, responses with chunked transfer encoding,
Content-Length or close-delimited bodies, interim 1xx responses skipped (RFC 9110 15.2), keep-alive
connections reused per target, HTTP or HTTPS. A
reused keep-alive connection that the server closed while idle is retried once on a fresh connection
before any failure is reported, as HTTP clients do. aiohttp stays the control-plane client
(`server_view.ServerClient`).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from typing import Optional
from urllib.parse import urlsplit

from specdash.bench.samples import Failure
from specdash.bench.sse import StreamAccount
from specdash.limits import MAX_CHUNK_LINE_BYTES, MAX_INTERIM_RESPONSES
from specdash.safetext import escape_controls

perf_ns = time.perf_counter_ns
_MAX_HEAD = 64 * 1024
_ERR_BODY = 300
READ_BUFFER = 256 * 1024
"""Bytes one socket read may take (asyncio's own limit for plain protocols)."""

Outcome = tuple[Optional[int], Optional[Failure], str]
"""(HTTP status, failure or None, detail). `Optional`: an alias is evaluated, and `X | None` is 3.10 (the agent
runs this module on the host's 3.9)."""


def _interim(head: bytes) -> bool:
    """True for the head of an interim response (1xx other than 101, which ends HTTP on the connection)."""
    parts = head.split(b"\r\n", 1)[0].split(b" ", 2)
    code = parts[1] if len(parts) >= 2 and parts[0].startswith(b"HTTP/1.") else b""
    return len(code) == 3 and code[:1] == b"1" and code != b"101"


class _Response:
    """Parses one response as its bytes arrive and feeds the body to a `StreamAccount`."""

    __slots__ = (
        "account",
        "done",
        "head",
        "status",
        "mode",
        "remaining",
        "cbuf",
        "crlf",
        "trailer",
        "keep_alive",
        "err_body",
        "got_bytes",
        "on_body",
        "interim",
    )

    def __init__(self, account: StreamAccount, done: Callable[[Outcome, bool], None]) -> None:
        self.account = account
        self.done = done
        self.head = b""
        self.status: int | None = None
        self.mode = ""
        self.remaining = 0
        self.cbuf = b""
        self.crlf = False
        self.trailer = False
        self.keep_alive = True
        self.err_body = b""
        self.got_bytes = False
        self.interim = 0

    def feed(self, data: bytes, t: int) -> None:
        self.got_bytes = True
        if self.status is None:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            while end >= 0 and _interim(self.head[:end]):
                # RFC 9110 15.2: a 1xx (`100 Continue`, `103 Early Hints`) is interim: skipped, and the final
                # response follows on the same connection (bounded: `MAX_INTERIM_RESPONSES`).
                self.interim += 1
                if self.interim > MAX_INTERIM_RESPONSES:
                    self.done((None, Failure.MALFORMED, f"more than {MAX_INTERIM_RESPONSES} interim responses"), False)
                    return
                self.head = self.head[end + 4 :]
                end = self.head.find(b"\r\n\r\n")
            if end < 0:
                if len(self.head) > _MAX_HEAD:
                    self.done((None, Failure.MALFORMED, "HTTP response head too large"), False)
                return
            data = self.head[end + 4 :]
            if not self._parse_head(self.head[:end]):
                return
            self.head = b""
            if self.mode == "length" and self.remaining == 0:
                self._complete()
                return
            if not data:
                return
        if self.mode == "chunked":
            body, complete = self._dechunk(data)
        elif self.mode == "length":
            body = data[: self.remaining]
            self.remaining -= len(body)
            complete = self.remaining == 0
        else:
            body, complete = data, False
        if body:
            if self.status == 200:
                self.account.feed(body, t)
                if self.account.error is not None:
                    # The stream is unusable; the connection is dropped, not reused.
                    self.done((self.status, None, ""), False)
                    return
            elif len(self.err_body) < _ERR_BODY:
                self.err_body += body[: _ERR_BODY - len(self.err_body)]
        if complete:
            self._complete()

    def _parse_head(self, head: bytes) -> bool:
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            self.done((None, Failure.MALFORMED, f"bad HTTP status line {lines[0][:80]!r}"), False)
            return False
        self.status = int(parts[1])
        if self.status == 101:  # we asked for no upgrade: what follows is no HTTP response of ours
            self.done((None, Failure.MALFORMED, "unexpected 101 Switching Protocols"), False)
            return False
        self.keep_alive = parts[0] == b"HTTP/1.1"
        self.mode = "eof"
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            value = value.strip().lower()
            if name == b"transfer-encoding" and b"chunked" in value:
                self.mode = "chunked"
            elif name == b"content-length" and self.mode != "chunked":
                self.mode = "length"
                self.remaining = int(value) if value.isdigit() and len(value) <= 18 else 0
            elif name == b"connection":
                self.keep_alive = value == b"keep-alive" or (self.keep_alive and value != b"close")
        if self.mode == "eof":
            self.keep_alive = False
        return True

    def _dechunk(self, data: bytes) -> tuple[bytes, bool]:
        if not (self.cbuf or self.remaining or self.crlf or self.trailer):
            # Fast path, the common case: the read is exactly one whole chunk, `size\r\ndata\r\n`.
            eol = data.find(b"\r\n", 0, 18)
            if eol > 0 and data.endswith(b"\r\n"):
                try:
                    size = int(data[:eol], 16)
                except ValueError:
                    size = -1
                if size > 0 and eol + 4 + size == len(data):
                    return data[eol + 2 : eol + 2 + size], False
        buf = self.cbuf + data if self.cbuf else data
        n = len(buf)
        pos = 0
        out: list[bytes] = []
        while pos < n:
            if self.remaining:
                take = min(self.remaining, n - pos)
                out.append(buf[pos : pos + take])
                pos += take
                self.remaining -= take
                if not self.remaining:
                    self.crlf = True
                continue
            if self.crlf:
                if n - pos < 2:
                    break
                pos += 2
                self.crlf = False
                continue
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                if n - pos > MAX_CHUNK_LINE_BYTES:
                    self.done(
                        (self.status, Failure.MALFORMED, f"chunk-size line longer than {MAX_CHUNK_LINE_BYTES} bytes"),
                        False,
                    )
                    return b"", False
                break
            if eol - pos > MAX_CHUNK_LINE_BYTES:
                self.done(
                    (self.status, Failure.MALFORMED, f"chunk-size line longer than {MAX_CHUNK_LINE_BYTES} bytes"), False
                )
                return b"", False
            line = buf[pos:eol]
            pos = eol + 2
            if self.trailer:
                if not line:
                    self.cbuf = b""
                    return b"".join(out), True
                continue
            try:
                size = int(line.split(b";", 1)[0], 16)
            except ValueError:
                self.done((self.status, Failure.RESET, f"bad chunked encoding {line[:40]!r}"), False)
                return b"", False
            if size == 0:
                self.trailer = True
            self.remaining = size
        self.cbuf = buf[pos:]
        return (out[0] if len(out) == 1 else b"".join(out)), False

    def _complete(self) -> None:
        if self.status != 200:
            text = escape_controls(self.err_body.decode(errors="replace").strip())
            self.done((self.status, Failure.HTTP_STATUS, f"HTTP {self.status}: {text}"), self.keep_alive)
        else:
            self.done((self.status, None, ""), self.keep_alive)

    def lost(self, exc: Exception | None) -> None:
        if self.mode == "eof" and self.status is not None and exc is None:
            self._complete()
            return
        why = f"{type(exc).__name__}: {exc}" if exc else "connection closed mid-response"
        self.done((self.status, Failure.RESET, why), False)


class _Conn(asyncio.BufferedProtocol):
    """One keep-alive connection; carries one request at a time.

    A buffered protocol: the loop reads into `buffer` (shared by the client's connections: each read is
    copied out before the callback returns). A plain protocol gets a fresh bytes object per read, and the
    stdlib loop allocates `READ_BUFFER` bytes for each before shrinking it: an allocation that large is an
    mmap and an munmap per read, half of the agent's CPU per event on the host's stdlib asyncio (uvloop reuses
    its buffer either way)."""

    def __init__(self, buffer: memoryview) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.resp: _Response | None = None
        self._buffer = buffer

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but have the same interface.
        self.transport = transport  # type: ignore[assignment]

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._buffer

    def buffer_updated(self, nbytes: int) -> None:
        t = perf_ns()
        self._received(self._buffer[:nbytes].tobytes(), t)

    def _received(self, data: bytes, t: int) -> None:
        resp = self.resp
        if resp is None:
            self.abort()  # bytes on an idle connection: the connection is out of step
            return
        try:
            resp.feed(data, t)
        except Exception as exc:  # noqa: BLE001 - whatever a server sends fails this request, not the loop
            resp.done(
                (resp.status, Failure.MALFORMED, f"unparseable response: {type(exc).__name__}: {exc}"[:300]), False
            )

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        resp = self.resp
        if resp is not None:
            resp.lost(exc)

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


class Http1Client:
    """Streams POST responses from one target over reused keep-alive connections."""

    def __init__(self, base_url: str, connect_timeout_s: float = 10.0, max_idle: int = 1024) -> None:
        """Prepare a client (connections open on demand).

        Args:
            base_url: `http://host:port` or `https://host:port`.
            connect_timeout_s: Time limit to open a connection.
            max_idle: Most idle connections kept for reuse.
        """
        parts = urlsplit(base_url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self._ssl: ssl.SSLContext | None = ssl.create_default_context() if parts.scheme == "https" else None
        self.host_header = parts.netloc.rpartition("@")[2].encode()  # never the URL's user:password
        self.connect_timeout_s = connect_timeout_s
        self.max_idle = max_idle
        self._idle: list[_Conn] = []
        self._buffer = memoryview(bytearray(READ_BUFFER))

    def request_bytes(self, path: str, body: bytes) -> bytes:
        """A complete POST request (head and body) ready to write."""
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host_header.decode()}\r\nContent-Type: application/json\r\n"
            f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        return head.encode() + body

    async def _connect(self) -> _Conn:
        loop = asyncio.get_running_loop()
        # wait_for, not asyncio.timeout (3.11): the agent runs this module on the host's Python >= 3.9.
        opening = loop.create_connection(lambda: _Conn(self._buffer), self.host, self.port, ssl=self._ssl)
        _, conn = await asyncio.wait_for(opening, self.connect_timeout_s)
        return conn

    def _take_idle(self) -> _Conn | None:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
        return None

    async def stream(self, request: bytes, account: StreamAccount) -> Outcome:
        """Send `request`; feed the 200 response body to `account`; return how it ended.

        Never raises for network trouble (it is returned as a failure); cancellation aborts the connection.
        """
        for attempt in range(2):
            conn = self._take_idle() if attempt == 0 else None
            reused = conn is not None
            if conn is None:
                try:
                    conn = await self._connect()
                except asyncio.TimeoutError:  # not the builtin one before 3.11
                    return None, Failure.REFUSED, f"connect timeout after {self.connect_timeout_s:g} s"
                except OSError as exc:
                    return None, Failure.REFUSED, f"{type(exc).__name__}: {exc}"
            outcome, got_bytes = await self._exchange(conn, request, account)
            if reused and not got_bytes and outcome[1] is Failure.RESET:
                continue  # the server closed this idle keep-alive connection: retry once, fresh
            return outcome
        return outcome

    async def _exchange(self, conn: _Conn, request: bytes, account: StreamAccount) -> tuple[Outcome, bool]:
        fut: asyncio.Future[tuple[Outcome, bool]] = asyncio.get_running_loop().create_future()

        def done(outcome: Outcome, reusable: bool) -> None:
            if fut.done():
                return
            conn.resp = None
            if reusable and not conn.closed and len(self._idle) < self.max_idle:
                self._idle.append(conn)
            else:
                conn.abort()
            fut.set_result((outcome, resp.got_bytes))

        resp = _Response(account, done)
        conn.resp = resp
        assert conn.transport is not None
        conn.transport.write(request)
        try:
            return await fut
        except asyncio.CancelledError:
            conn.resp = None
            conn.abort()
            raise

    def close(self) -> None:
        """Close every idle connection."""
        for conn in self._idle:
            conn.abort()
        self._idle.clear()
