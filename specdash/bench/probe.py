"""The streaming probe: closed-loop load against one server over long-lived keep-alive connections.

This module runs inside one event loop (normally a probe worker process, see `specdash.bench.workers`).
Cost per SSE event is what matters (reference/measurement.md §9, §12), so:

- the data plane is `specdash.bench.http1`: each socket read is stamped with `perf_counter_ns()` and
  accounted synchronously in the protocol callback (no task wake-up per read), connections are kept alive
  and reused per target;
- request bytes (head and JSON body) are built once per prompt, not per request;
- per-request stall and total timeouts are enforced by one watchdog task scanning the in-flight table,
  not by per-read timers;
- live token credits are harvested from in-flight streams by a ticker, so a chunk costs no extra call.

The probe measures its own headroom per level (`Headroom`): the ticker's event-loop lag, the process's CPU
share and the delay between a request's scheduled and actual send (`specdash.bench.headroom` judges it).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from specdash.bench.compat import uncancel
from specdash.bench.http1 import Http1Client
from specdash.bench.samples import CONNECTION_FAILURES, Failure, RequestSample
from specdash.bench.sse import Endpoint, StreamAccount
from specdash.core.series import percentile

perf_ns = time.perf_counter_ns


@dataclass(frozen=True)
class ProbeSettings:
    """What every request of a run looks like (identical across modes for a fair comparison)."""

    endpoint: Endpoint = Endpoint.GENERATE
    """Which streaming API to call."""
    output_len: int = 256
    """Tokens requested per request (`ignore_eos` keeps it fixed)."""
    model: str | None = None
    """`model` for the OpenAI endpoints (the sweep fills it from `/v1/models` when unset)."""
    ignore_eos: bool = True
    """Ask the server to ignore EOS so every response has `output_len` tokens."""
    continuous_usage: bool = True
    """Ask OpenAI endpoints for usage on every chunk (per-chunk token counts); ignored servers fall back."""
    request_timeout_s: float = 600.0
    """Total time limit per request."""
    stall_timeout_s: float = 60.0
    """A request with no bytes for this long fails as a stall."""
    connect_timeout_s: float = 10.0
    """Time limit to open a connection."""
    max_streams: int = 1024
    """Most idle keep-alive connections kept: at least the largest concurrency this probe will drive."""


def request_body(settings: ProbeSettings, prompt: str, max_tokens: int) -> bytes:
    """The JSON body for one request (temperature 0, fixed length, streaming with usage)."""
    body: dict[str, Any]
    if settings.endpoint is Endpoint.GENERATE:
        body = {
            "text": prompt,
            "sampling_params": {"max_new_tokens": max_tokens, "temperature": 0, "ignore_eos": settings.ignore_eos},
            "stream": True,
        }
    else:
        body = {
            "max_tokens": max_tokens,
            "temperature": 0,
            "ignore_eos": settings.ignore_eos,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": settings.continuous_usage},
        }
        if settings.model:
            body["model"] = settings.model
        if settings.endpoint is Endpoint.CHAT:
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
    return json.dumps(body, separators=(",", ":")).encode()


@dataclass(frozen=True)
class LevelPlan:
    """One probe process's share of a concurrency level (picklable: sent to worker processes)."""

    concurrency: int
    """Streams this process keeps busy."""
    first_index: int = 0
    """The first global request index this process sends."""
    index_step: int = 1
    """Indices handled: first_index, first_index + step, ... (the processes interleave the sequence)."""
    total_requests: int | None = None
    """Global request count of the level; None with a duration."""
    duration_s: float | None = None
    """Send new requests for this long; None with a request count."""
    max_seconds: float = 3600.0
    """Hard bound on the level, whatever else happens."""
    max_requests: int = 1_000_000
    """Hard bound on requests sent by this process in duration mode."""
    output_len: int | None = None
    """Override of the settings' output length (used for warmup)."""
    abort_after_connection_failures: int = 3
    """Stop the level after this many consecutive refused/reset requests with no success between."""
    tick_s: float = 0.25
    """Interval of live credits and of event-loop lag measurement."""


@dataclass(frozen=True)
class Headroom:
    """How close one probe process came to being the bottleneck during a level."""

    cpu_share: float
    """Process CPU time / wall time (1.0 = one full core)."""
    loop_lag_p99_ms: float
    """p99 lateness of the ticker's wake-ups."""
    loop_lag_max_ms: float
    """Worst lateness of the ticker's wake-ups."""
    send_delay_p99_ms: float
    """p99 of (actual send - scheduled send)."""
    events: int
    """Content chunks received (for CPU per event)."""
    loop_lag_p90_ms: float = 0.0
    """p90 lateness of the ticker's wake-ups (what `specdash.bench.headroom` weighs)."""


@dataclass(frozen=True)
class LevelOutcome:
    """How one process's part of a level ended."""

    sent: int
    """Requests sent (finished or failed)."""
    failed: int
    """Requests that failed."""
    aborted: str | None
    """Why the level was stopped early (server gone, time limit, stop requested); None when it ran out."""
    headroom: Headroom
    """The process's own headroom."""


class Sink(Protocol):
    """Where a running level reports to (a pipe in a worker, a list in tests)."""

    def sample(self, sample: RequestSample) -> None:
        """A request finished or failed."""

    def tick(self, arrivals: list[tuple[int, int]], inflight: int, now_ns: int) -> None:
        """Live token credits (arrival ns, tokens) since the last tick, and the in-flight count."""


@dataclass
class _Flight:
    task: asyncio.Task[Any] | None
    account: StreamAccount
    start_ns: int
    abort: Failure | None = None
    credited: int = 0


@dataclass
class _LevelState:
    stop: str | None = None
    sent: int = 0
    failed: int = 0
    consecutive_conn_failures: int = 0
    lags_ms: list[float] = field(default_factory=list)
    send_delays_ms: list[float] = field(default_factory=list)
    pending_credits: list[tuple[int, int]] = field(default_factory=list)
    events: int = 0


class Probe:
    """Sends streaming requests to one server and turns each into a `RequestSample`."""

    def __init__(self, base_url: str, settings: ProbeSettings, prompts: tuple[str, ...], worker: int = 0) -> None:
        """Prepare a probe; the session opens in `__aenter__`.

        Args:
            base_url: e.g. `http://127.0.0.1:30000` (the local end of an SSH forward).
            settings: Request shape and timeouts.
            prompts: The prompt set, in order.
            worker: This process's number, stamped on samples.
        """
        if not prompts:
            raise ValueError("no prompts")
        self.base_url = base_url.rstrip("/")
        self.settings = settings
        self.prompts = prompts
        self.worker = worker
        self._bodies: dict[tuple[int, int], bytes] = {}
        self._client: Http1Client | None = None
        self._inflight: dict[int, _Flight] = {}
        self._level: _LevelState | None = None
        self._watchdog_task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Probe:
        self._client = Http1Client(self.base_url, self.settings.connect_timeout_s, self.settings.max_streams)
        self._watchdog_task = asyncio.create_task(self._watchdog())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._watchdog_task is not None:
            self._watchdog_task.cancel()
            await asyncio.gather(self._watchdog_task, return_exceptions=True)
            self._watchdog_task = None
        if self._client is not None:
            self._client.close()
            self._client = None

    def stop(self, reason: str) -> None:
        """Ask the running level to send no more requests (in-flight ones finish)."""
        if self._level is not None and self._level.stop is None:
            self._level.stop = reason

    def _body(self, prompt_index: int, max_tokens: int) -> bytes:
        key = (prompt_index, max_tokens)
        req = self._bodies.get(key)
        if req is None:
            assert self._client is not None
            body = request_body(self.settings, self.prompts[prompt_index], max_tokens)
            req = self._bodies[key] = self._client.request_bytes(self.settings.endpoint.path, body)
        return req

    async def request(self, index: int, scheduled_ns: int, max_tokens: int | None = None) -> RequestSample:
        """Send request `index` (prompt `index % len(prompts)`) and account for its stream.

        Never raises for anything the server or the network does: failures come back as samples.
        """
        client = self._client
        if client is None:
            raise RuntimeError("Probe used outside 'async with'")
        n_req = self.settings.output_len if max_tokens is None else max_tokens
        prompt_index = index % len(self.prompts)
        request = self._body(prompt_index, n_req)
        account = StreamAccount(self.settings.endpoint, n_req)
        start = perf_ns()
        flight = _Flight(asyncio.current_task(), account, start)
        key = id(flight)
        self._inflight[key] = flight
        status: int | None = None
        try:
            status, failure, detail = await client.stream(request, account)
            if failure is not None:
                account.fail(failure, detail)
            elif not account.finished:
                account.fail(Failure.EOF, "stream ended without [DONE]")
        except asyncio.CancelledError:
            if flight.abort is None or uncancel(asyncio.current_task()) > 0:
                raise
            limit = self.settings.stall_timeout_s if flight.abort is Failure.STALL else self.settings.request_timeout_s
            account.fail(flight.abort, f"{flight.abort.value} after {limit:g} s")
        except Exception as exc:  # noqa: BLE001 - a probe bug must cost one sample, not the level
            account.fail(Failure.CLIENT, f"{type(exc).__name__}: {exc}")
        finally:
            self._inflight.pop(key, None)
        end = account.done_ns if account.done_ns is not None and account.error is None else perf_ns()
        total, estimated = account.finish()
        self._settle_credits(flight, total)
        times = account.times
        return RequestSample(
            index=index,
            prompt_index=prompt_index,
            worker=self.worker,
            error=account.error,
            detail=account.detail,
            http_status=status,
            scheduled_ns=scheduled_ns,
            start_ns=start,
            end_ns=end,
            first_token_ns=times[0] if times else None,
            last_token_ns=times[-1] if times else None,
            output_tokens=total,
            requested_tokens=n_req,
            estimated=estimated,
            per_chunk_exact=account.exact,
            chunk_offsets_us=tuple((t - start) // 1000 for t in times),
            chunk_tokens=tuple(account.tokens),
            spec_accept_length=account.spec_accept_length,
        )

    def _settle_credits(self, flight: _Flight, total: int) -> None:
        level = self._level
        if level is None:
            return
        acct = flight.account
        rest = list(zip(acct.times[acct.harvested :], acct.tokens[acct.harvested :]))
        level.events += len(acct.times)
        level.pending_credits.extend(rest)
        # finish() may have moved the remainder of a partial count onto an already-credited chunk.
        fix = total - flight.credited - sum(tok for _, tok in rest)
        if fix and acct.times:
            level.pending_credits.append((acct.times[-1], fix))

    def _harvest(self) -> list[tuple[int, int]]:
        level = self._level
        out: list[tuple[int, int]] = []
        if level is not None:
            out, level.pending_credits = level.pending_credits, []
        for flight in self._inflight.values():
            acct = flight.account
            h = acct.harvested
            n = len(acct.times)
            if n > h:
                new = list(zip(acct.times[h:n], acct.tokens[h:n]))
                flight.credited += sum(tok for _, tok in new)
                acct.harvested = n
                out.extend(new)
        return out

    async def _watchdog(self) -> None:
        stall_ns = int(self.settings.stall_timeout_s * 1e9)
        total_ns = int(self.settings.request_timeout_s * 1e9)
        interval = min(0.25, self.settings.stall_timeout_s / 4, self.settings.request_timeout_s / 4)
        while True:
            await asyncio.sleep(interval)
            now = perf_ns()
            for flight in list(self._inflight.values()):
                if flight.abort is not None or flight.task is None:
                    continue
                if now - flight.start_ns > total_ns:
                    flight.abort = Failure.TIMEOUT
                elif now - max(flight.start_ns, flight.account.last_ns) > stall_ns:
                    flight.abort = Failure.STALL
                else:
                    continue
                flight.task.cancel()

    async def _ticker(self, sink: Sink, tick_s: float) -> None:
        level = self._level
        assert level is not None
        tick_ns = int(tick_s * 1e9)
        expected = perf_ns() + tick_ns
        while True:
            await asyncio.sleep(tick_s)
            now = perf_ns()
            level.lags_ms.append(max(0, now - expected) / 1e6)
            expected = now + tick_ns
            sink.tick(self._harvest(), len(self._inflight), now)

    async def run_level(self, plan: LevelPlan, sink: Sink) -> LevelOutcome:
        """Run this process's share of a level: `plan.concurrency` closed-loop streams.

        Bounded in count (`total_requests` or `max_requests`) and in time (`duration_s`, `max_seconds`).
        Stops early after `abort_after_connection_failures` consecutive refused/reset requests.
        """
        level = self._level = _LevelState()
        t0 = perf_ns()
        cpu0 = time.process_time()
        duration_ns = None if plan.duration_s is None else int(plan.duration_s * 1e9)
        hard_ns = int(plan.max_seconds * 1e9)
        next_k = 0

        def next_index() -> int | None:
            nonlocal next_k
            if level.stop is not None:
                return None
            now = perf_ns()
            if now - t0 >= hard_ns:
                level.stop = f"level time limit {plan.max_seconds:g} s"
                return None
            if duration_ns is not None and (now - t0 >= duration_ns or next_k >= plan.max_requests):
                return None
            idx = plan.first_index + next_k * plan.index_step
            if plan.total_requests is not None and idx >= plan.total_requests:
                return None
            next_k += 1
            return idx

        async def slot() -> None:
            scheduled = perf_ns()
            while (idx := next_index()) is not None:
                s = await self.request(idx, scheduled, plan.output_len)
                scheduled = perf_ns()
                level.sent += 1
                level.send_delays_ms.append((s.start_ns - s.scheduled_ns) / 1e6)
                if s.error is None:
                    level.consecutive_conn_failures = 0
                else:
                    level.failed += 1
                    if s.error in CONNECTION_FAILURES:
                        level.consecutive_conn_failures += 1
                        if level.consecutive_conn_failures >= plan.abort_after_connection_failures:
                            self.stop(f"server unreachable ({s.error.value}: {s.detail[:120]})")
                sink.sample(s)

        helpers = [asyncio.create_task(self._ticker(sink, plan.tick_s))]
        try:
            await asyncio.gather(*(slot() for _ in range(max(1, plan.concurrency))))
        finally:
            for h in helpers:
                h.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            sink.tick(self._harvest(), 0, perf_ns())
            self._level = None
        wall = max(1, perf_ns() - t0) / 1e9
        headroom = Headroom(
            cpu_share=(time.process_time() - cpu0) / wall,
            loop_lag_p99_ms=percentile(level.lags_ms, 99) or 0.0,
            loop_lag_max_ms=max(level.lags_ms, default=0.0),
            send_delay_p99_ms=percentile(level.send_delays_ms, 99) or 0.0,
            events=level.events,
            loop_lag_p90_ms=percentile(level.lags_ms, 90) or 0.0,
        )
        return LevelOutcome(level.sent, level.failed, level.stop, headroom)


class ListSink:
    """A `Sink` that keeps everything in memory (in-process runs and tests)."""

    def __init__(self, on_sample: Callable[[RequestSample], None] | None = None) -> None:
        """Create an empty sink; `on_sample` is also called for every sample."""
        self.samples: list[RequestSample] = []
        self.credits: list[tuple[int, int]] = []
        self.ticks = 0
        self._on_sample = on_sample

    def sample(self, sample: RequestSample) -> None:
        """Keep the sample."""
        self.samples.append(sample)
        if self._on_sample is not None:
            self._on_sample(sample)

    def tick(self, arrivals: list[tuple[int, int]], inflight: int, now_ns: int) -> None:
        """Keep the credits."""
        self.ticks += 1
        self.credits.extend(arrivals)


def install_uvloop() -> bool:
    """Use uvloop for new event loops when it is installed (about 45 % less CPU per event)."""
    try:
        import uvloop
    except ImportError:
        return False
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return True
