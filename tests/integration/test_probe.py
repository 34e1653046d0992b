"""The probe over real loopback sockets against a controllable SSE server (tests.support.fake_server)."""

from __future__ import annotations

import time

import pytest

from specdash.bench.probe import LevelPlan, ListSink, Probe, ProbeSettings
from specdash.bench.samples import Failure
from specdash.bench.sse import Endpoint
from tests.support.fake_server import FakeServer

PROMPTS = ("one", "two", "three")


def settings(endpoint: Endpoint = Endpoint.GENERATE, n: int = 20, **kw: float) -> ProbeSettings:
    return ProbeSettings(endpoint=endpoint, output_len=n, model="fake-model", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("endpoint", list(Endpoint))
@pytest.mark.parametrize("k", [1, 3, 7])
async def test_tokens_counted_exactly_whatever_the_tokens_per_chunk(
    server: FakeServer, endpoint: Endpoint, k: int
) -> None:
    server.config.tokens_per_chunk = k
    async with Probe(server.url, settings(endpoint, 20), PROMPTS) as probe:
        s = await probe.request(0, time.perf_counter_ns())
    assert s.ok, s.detail
    assert s.output_tokens == 20 and not s.estimated and not s.short
    assert sum(s.chunk_tokens) == 20
    assert len(s.chunk_tokens) == -(-20 // k)  # ceil: chunks are not tokens
    assert s.per_chunk_exact
    assert s.first_token_ns is not None and s.last_token_ns is not None
    assert s.start_ns < s.first_token_ns <= s.last_token_ns <= s.end_ns


@pytest.mark.parametrize("spaces", [False, True])
async def test_openai_without_continuous_usage_falls_back_gracefully(server: FakeServer, spaces: bool) -> None:
    server.config.continuous_usage = False
    server.config.spaces = spaces
    server.config.tokens_per_chunk = 4
    async with Probe(server.url, settings(Endpoint.CHAT, 18), PROMPTS) as probe:
        s = await probe.request(0, time.perf_counter_ns())
    assert s.ok and s.output_tokens == 18 and not s.estimated
    assert not s.per_chunk_exact and sum(s.chunk_tokens) == 18 and len(s.chunk_tokens) == 5


async def test_no_usage_at_all_is_marked_estimated(server: FakeServer) -> None:
    server.config.usage = False
    server.config.tokens_per_chunk = 2
    async with Probe(server.url, settings(Endpoint.COMPLETIONS, 10), PROMPTS) as probe:
        s = await probe.request(0, time.perf_counter_ns())
    assert s.ok and s.estimated and s.output_tokens == 5  # 5 chunks, honestly labelled as a guess


async def test_short_response_is_flagged_with_the_generated_count(server: FakeServer) -> None:
    server.config.behaviour = "short"
    async with Probe(server.url, settings(Endpoint.GENERATE, 50), PROMPTS) as probe:
        s = await probe.request(0, time.perf_counter_ns())
    assert s.ok and s.output_tokens == 5 and s.requested_tokens == 50 and s.short


async def test_spec_accept_length_read_from_final_generate_chunk(server: FakeServer) -> None:
    server.config.tokens_per_chunk = 3
    async with Probe(server.url, settings(Endpoint.GENERATE, 12), PROMPTS) as probe:
        s = await probe.request(0, time.perf_counter_ns())
    assert s.spec_accept_length == 3.0


@pytest.mark.parametrize(
    ("behaviour", "reason"),
    [
        ("http500", Failure.HTTP_STATUS),
        ("malformed", Failure.MALFORMED),
        ("bad_json", Failure.MALFORMED),
        ("reset", Failure.RESET),
        ("stall", Failure.STALL),
        ("no_done", Failure.EOF),
        ("error_event", Failure.STREAM_ERROR),
    ],
)
async def test_each_failure_is_recorded_with_its_reason(server: FakeServer, behaviour: str, reason: Failure) -> None:
    server.config.behaviour = behaviour
    async with Probe(server.url, settings(Endpoint.CHAT, 20, stall_timeout_s=0.3), PROMPTS) as probe:
        s = await probe.request(0, time.perf_counter_ns())
    assert s.error is reason, s.detail
    assert s.detail
    if behaviour == "http500":
        assert s.http_status == 500 and "boom" in s.detail
    if behaviour in ("reset", "stall", "no_done"):
        assert len(s.chunk_tokens) == 2  # the good chunks before the failure are kept


async def test_total_timeout(server: FakeServer) -> None:
    server.config.interval_s = 0.05
    async with Probe(server.url, settings(Endpoint.GENERATE, 1000, request_timeout_s=0.3), PROMPTS) as probe:
        s = await probe.request(0, time.perf_counter_ns())
    assert s.error is Failure.TIMEOUT
    assert 0.3 <= s.e2e_ms / 1000 < 2.0


async def test_refused_connection() -> None:
    srv = FakeServer()
    port = await srv.start()
    await srv.stop()
    async with Probe(f"http://127.0.0.1:{port}", settings(), PROMPTS) as probe:
        s = await probe.request(0, time.perf_counter_ns())
    assert s.error is Failure.REFUSED


async def test_level_with_mixed_failures_never_drops_a_request(server: FakeServer) -> None:
    server.config.tokens_per_chunk = 2
    server.config.script = ["ok", "http500", "reset", "ok", "malformed", "stall", "ok", "no_done", "error_event"]
    sink = ListSink()
    async with Probe(server.url, settings(Endpoint.CHAT, 10, stall_timeout_s=0.3), PROMPTS) as probe:
        out = await probe.run_level(LevelPlan(concurrency=3, total_requests=15, tick_s=0.05), sink)
    assert out.sent == 15 and len(sink.samples) == 15
    assert sorted(s.index for s in sink.samples) == list(range(15))
    assert [s.prompt_index for s in sorted(sink.samples, key=lambda s: s.index)] == [i % 3 for i in range(15)]
    failed = [s for s in sink.samples if not s.ok]
    assert out.failed == len(failed) == 6
    assert {s.error for s in failed} == {Failure.HTTP_STATUS, Failure.RESET, Failure.MALFORMED, Failure.STALL,
                                        Failure.EOF, Failure.STREAM_ERROR}  # fmt: skip
    assert out.aborted is None
    # Live credits add up to exactly the successful tokens plus the good chunks of failed streams.
    assert sum(t for _, t in sink.credits) == sum(sum(s.chunk_tokens) for s in sink.samples)
    assert out.headroom.events > 0 and 0 <= out.headroom.cpu_share


async def test_level_stops_when_the_server_dies(server: FakeServer) -> None:
    server.config.interval_s = 0.002
    server.config.die_after_requests = 6
    sink = ListSink()
    async with Probe(server.url, settings(Endpoint.GENERATE, 30), PROMPTS) as probe:
        out = await probe.run_level(
            LevelPlan(concurrency=2, total_requests=1000, abort_after_connection_failures=3), sink
        )
    assert out.aborted is not None and "unreachable" in out.aborted
    ok = [s for s in sink.samples if s.ok]
    assert len(ok) >= 4  # the requests finished before the crash are kept
    assert out.sent == len(sink.samples) < 20  # bounded: it stopped instead of hammering a dead port
    assert all(s.error in (Failure.RESET, Failure.REFUSED) for s in sink.samples if not s.ok)


async def test_duration_mode_is_bounded_in_time(server: FakeServer) -> None:
    server.config.interval_s = 0.005
    sink = ListSink()
    async with Probe(server.url, settings(Endpoint.GENERATE, 5), PROMPTS) as probe:
        t0 = time.perf_counter()
        out = await probe.run_level(LevelPlan(concurrency=2, duration_s=0.4), sink)
        elapsed = time.perf_counter() - t0
    assert out.sent >= 4 and out.failed == 0
    assert 0.4 <= elapsed < 1.5
    assert max(s.start_ns for s in sink.samples) - min(s.start_ns for s in sink.samples) < 0.45e9


async def test_hard_time_limit_stops_a_count_level(server: FakeServer) -> None:
    server.config.interval_s = 0.01
    sink = ListSink()
    async with Probe(server.url, settings(Endpoint.GENERATE, 5), PROMPTS) as probe:
        out = await probe.run_level(LevelPlan(concurrency=1, total_requests=10_000, max_seconds=0.3), sink)
    assert out.aborted is not None and "time limit" in out.aborted
    assert 0 < out.sent < 100


async def test_connections_are_reused(server: FakeServer) -> None:
    async with Probe(server.url, settings(Endpoint.GENERATE, 3), PROMPTS) as probe:
        sink = ListSink()
        await probe.run_level(LevelPlan(concurrency=2, total_requests=10), sink)
    assert len(server._transports) <= 2


async def test_connection_closed_by_server_while_idle_is_not_a_failure(server: FakeServer) -> None:
    async with Probe(server.url, settings(Endpoint.GENERATE, 4), PROMPTS) as probe:
        first = await probe.request(0, time.perf_counter_ns())
        for t in list(server._transports):
            t.close()  # the server's keep-alive timeout fires between two requests
        second = await probe.request(1, time.perf_counter_ns())
    assert first.ok and second.ok, second.detail
