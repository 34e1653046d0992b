"""The probe against misbehaving servers, beyond tests/integration/test_probe.py (which covers each fake-server
failure on the chat endpoint, the total timeout, refused connections and a mixed level on chat).

Added here: every failure on the other two endpoints, failures before the first chunk, and raw-socket servers
that no HTTP library would write: one that accepts and never answers, one that answers junk, one that
trickles bytes forever (stall detection cannot fire; only the total timeout can). "Nothing lost" for each:
the request comes back as one sample with a failure reason and a detail, within its time limits, and the
probe itself never raises.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest

from specdash.bench.probe import LevelPlan, ListSink, Probe, ProbeSettings
from specdash.bench.samples import Failure
from specdash.bench.sse import Endpoint
from tests.support.fake_server import FakeServer

PROMPTS = ("one", "two", "three")
FAILURES = {
    "http500": Failure.HTTP_STATUS,
    "malformed": Failure.MALFORMED,
    "bad_json": Failure.MALFORMED,
    "reset": Failure.RESET,
    "stall": Failure.STALL,
    "no_done": Failure.EOF,
    "error_event": Failure.STREAM_ERROR,
}


def settings(endpoint: Endpoint, n: int = 12, **kw: float) -> ProbeSettings:
    return ProbeSettings(endpoint=endpoint, output_len=n, model="fake-model", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("endpoint", [Endpoint.GENERATE, Endpoint.COMPLETIONS])
@pytest.mark.parametrize("behaviour", list(FAILURES))
@pytest.mark.parametrize("after", [0, 2])
async def test_every_failure_on_every_endpoint_is_one_sample_with_its_reason(
    server: FakeServer, endpoint: Endpoint, behaviour: str, after: int
) -> None:
    server.config.behaviour = behaviour
    server.config.fail_after_chunks = after
    async with Probe(server.url, settings(endpoint, stall_timeout_s=0.3, request_timeout_s=5), PROMPTS) as probe:
        began = time.monotonic()
        s = await probe.request(0, time.perf_counter_ns())
        took = time.monotonic() - began
    assert s.error is FAILURES[behaviour], (s.error, s.detail)
    assert s.detail
    assert took < 3
    if behaviour in ("reset", "stall", "no_done"):
        assert len(s.chunk_tokens) == after  # the good chunks before the failure are kept


async def test_a_level_of_every_failure_on_the_generate_endpoint_drops_nothing(server: FakeServer) -> None:
    server.config.script = ["ok", *FAILURES, "ok"] * 2
    sink = ListSink()
    async with Probe(server.url, settings(Endpoint.GENERATE, stall_timeout_s=0.3), PROMPTS) as probe:
        out = await probe.run_level(LevelPlan(concurrency=4, total_requests=18, tick_s=0.05), sink)
    assert out.sent == 18 and len(sink.samples) == 18
    assert sorted(s.index for s in sink.samples) == list(range(18))
    assert out.failed == 14 and {s.error for s in sink.samples if not s.ok} == set(FAILURES.values())


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _raw_server(handler: Handler) -> tuple[asyncio.Server, str]:
    srv = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    return srv, f"http://127.0.0.1:{port}"


async def _silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(65536)
    await asyncio.sleep(30)  # accepts, reads the request, never answers
    writer.close()


async def _junk(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(65536)
    writer.write(b"\x00\xffHELLO not http at all\r\n\r\n\x1b[31m")
    await writer.drain()
    writer.close()


async def _trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(65536)
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
    try:
        while True:  # a comment line every 50 ms: bytes keep coming, no token ever does
            writer.write(b"3\r\n:\n\n\r\n")
            await writer.drain()
            await asyncio.sleep(0.05)
    except (ConnectionError, asyncio.CancelledError):
        writer.close()


@pytest.mark.parametrize(
    ("handler", "reasons", "limit"),
    [
        (_silent, {Failure.STALL, Failure.TIMEOUT}, 3.0),
        (_junk, {Failure.RESET, Failure.MALFORMED, Failure.HTTP_STATUS}, 3.0),
        (_trickle, {Failure.TIMEOUT}, 3.0),
    ],
    ids=["accepts-never-answers", "answers-junk", "trickles-forever"],
)
@pytest.mark.parametrize("endpoint", list(Endpoint))
async def test_raw_misbehaving_servers_end_as_failed_samples_within_the_timeouts(
    handler: Handler, reasons: set[Failure], limit: float, endpoint: Endpoint
) -> None:
    srv, url = await _raw_server(handler)
    try:
        async with Probe(url, settings(endpoint, stall_timeout_s=0.4, request_timeout_s=1.0), PROMPTS) as probe:
            began = time.monotonic()
            s = await probe.request(0, time.perf_counter_ns())
            took = time.monotonic() - began
    finally:
        srv.close()
    assert s.error in reasons, (s.error, s.detail)
    assert s.detail
    assert took < limit, took
