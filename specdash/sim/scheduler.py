"""The batch scheduler: one asyncio task that advances every running request once per step.

Each iteration admits waiting requests up to the running cap (as one prefill batch that yields their first
token), then runs one decode step over the whole running batch. Steps are scheduled on absolute deadlines
(`next_at += step_time`), so time spent writing SSE events or logging never accumulates into drift; after
idling, or after falling more than a second behind (a stopped process), the deadline resyncs to now.
Requests learn about new tokens through a per-request future that the handler awaits; a slow handler
coalesces several steps into one event, with cumulative counts still exact.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from specdash.sim.logstyle import LogWriter
from specdash.sim.model import AcceptSampler, ThroughputModel

EOS_TOKEN_ID = 163586
"""Kimi K2's `<|im_end|>`; what `finish_reason.matched` shows on a natural stop."""
WORDS = (
    "the of and to in is that for it as with was on be by this are from or at an which have not but "
    "they his all were we when there can more one been their if has will so about would what up out "
    "into them some could time these two may then do first any like now such only other new over also "
    "model token speed draft batch server throughput GPU cache graph decode verify accept stream"
).split()
"""The simulated vocabulary: one word per token, so text length tracks the token count."""


@dataclass(eq=False)
class SimRequest:
    """One generation request and its progress."""

    rid: str
    prompt_tokens: int
    max_new_tokens: int
    stop_at: int | None = None
    """Natural end (EOS) before `max_new_tokens`, or None (ignore_eos, or a long natural length)."""
    internal: bool = False
    """Health probes: not counted in metrics."""
    output_ids: list[int] = field(default_factory=list)
    text: str = ""
    verify_ct: int = 0
    """Decode forward passes this request took part in."""
    spec_tokens: int = 0
    """Tokens gained in speculative steps."""
    spec_steps: int = 0
    """Speculative steps this request took part in."""
    finish_reason: dict[str, object] | None = None
    aborted: bool = False
    created: float = field(default_factory=time.monotonic)
    received: float | None = None
    """When its first bytes were read from the socket (`server.ReceiptStamp`): before the front end's queue."""
    first_token_at: float | None = None
    first_sent: float | None = None
    """When the response's first token was handed to the socket (after its chunk was serialised)."""
    finished_at: float | None = None
    emitted: list[tuple[float, int]] = field(default_factory=list)
    """(monotonic time, cumulative tokens) at every step that produced tokens: the request log's ground truth."""
    word_seed: str | None = None
    """Greedy requests (temperature 0): the words follow from the prompt alone, so every mode (speculative or
    not) writes the same text for the same prompt, as lossless speculative decoding must. Else from `rid`."""
    diverge_at: int | None = None
    """Fault `spec-diverge=N`: token N differs from the greedy text (a lossy verify step)."""
    _waiter: asyncio.Future[None] | None = None
    _word_rng: random.Random | None = None

    @property
    def finished(self) -> bool:
        """True once a finish reason is set."""
        return self.finish_reason is not None

    @property
    def completion_tokens(self) -> int:
        """Tokens generated so far."""
        return len(self.output_ids)

    def _notify(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait_progress(self, seen: int) -> None:
        """Return once more than `seen` tokens exist or the request finished."""
        while len(self.output_ids) <= seen and not self.finished:
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter

    def advance(self, n: int, now: float) -> None:
        """Append up to `n` tokens; set the finish reason when a limit is reached."""
        have = len(self.output_ids)
        limit = self.max_new_tokens if self.stop_at is None else min(self.stop_at, self.max_new_tokens)
        n = max(0, min(n, limit - have))
        rng = self._word_rng
        if rng is None:
            rng = self._word_rng = random.Random(self.word_seed if self.word_seed is not None else self.rid)
        pieces = []
        for k in range(have, have + n):
            i = int(rng.random() * len(WORDS))
            if k == self.diverge_at:
                i = (i + 1) % len(WORDS)
            self.output_ids.append(1000 + i)
            pieces.append(" " + WORDS[i])
        self.text += "".join(pieces)
        if self.first_token_at is None and n:
            self.first_token_at = now
        total = len(self.output_ids)
        if n:
            self.emitted.append((now, total))
        if self.stop_at is not None and total >= self.stop_at and self.stop_at <= self.max_new_tokens:
            self.finish_reason = {"type": "stop", "matched": EOS_TOKEN_ID}
        elif total >= self.max_new_tokens:
            self.finish_reason = {"type": "length", "length": self.max_new_tokens}
        if self.finished:
            self.finished_at = now
        self._notify()

    def abort(self, message: str = "Abort before prefill") -> None:
        """Mark aborted (client went away); the scheduler drops it at its next step."""
        self.aborted = True
        if self.finish_reason is None:
            self.finish_reason = {"type": "abort", "message": message, "status_code": 400, "err_type": None}
        self._notify()


@dataclass
class Gauges:
    """Values SGLang refreshes only when it logs a `Decode batch` line (every 40 decode steps)."""

    num_running_reqs: int = 0
    num_queue_reqs: int = 0
    num_used_tokens: int = 0
    token_usage: float = 0.0
    gen_throughput: float = 0.0
    spec_accept_length: float = 0.0
    spec_accept_rate: float = 0.0
    is_cuda_graph: float = 0.0


@dataclass
class Counters:
    """Lifetime counters (Prometheus counters and `/server_info` internal state)."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    num_requests: int = 0
    spec_tokens: int = 0
    """Tokens from speculative steps since the last flush (for `avg_spec_accept_length`)."""
    spec_steps: int = 0
    """Request-steps that speculated since the last flush."""
    ttft: list[float] = field(default_factory=list)
    e2e: list[float] = field(default_factory=list)
    produced: int = 0
    """Tokens generated so far, counted at each step (vLLM's `generation_tokens_total` grows per step)."""
    drafts: int = 0
    """Request-steps that speculated, never reset (vLLM's `spec_decode_num_drafts`)."""
    accepted: int = 0
    """Draft tokens accepted in them, never reset (vLLM's `spec_decode_num_accepted_tokens`)."""


class Scheduler:
    """Discrete-step batch scheduler driven by a `ThroughputModel`."""

    def __init__(
        self,
        model: ThroughputModel,
        log: LogWriter,
        seed: int,
        kv_tokens: int,
        cuda_graph_max_bs: int,
        num_draft_tokens: int = 1,
        decode_log_interval: int = 40,
        crash_at_batch: int | None = None,
        on_crash: Callable[[], None] | None = None,
        on_finish: Callable[[SimRequest], None] | None = None,
    ) -> None:
        self.model = model
        self.log = log
        self.rng = random.Random(seed)
        self.sampler = AcceptSampler(model.accept_prob, model.num_steps, self.rng)
        self.kv_tokens = kv_tokens
        self.graph_max_bs = cuda_graph_max_bs
        self.num_draft_tokens = num_draft_tokens
        self.interval = decode_log_interval
        self.crash_at_batch = crash_at_batch
        self.on_crash = on_crash
        self.on_finish = on_finish
        """Called with every finished client request (not health probes, not aborted ones)."""
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.gauges = Gauges()
        self.counters = Counters()
        self.first_batch_delay = 0.0
        """Extra seconds added to the very first forward pass (warmup's JIT and autotuning)."""
        self.last_gen_throughput = 0.0
        self.crashed = False
        self._wake = asyncio.Event()
        self._decode_steps = 0
        self._interval_tokens = 0
        self._interval_spec_tokens = 0
        self._interval_spec_steps = 0
        self._interval_start = time.monotonic()

    @property
    def idle(self) -> bool:
        """No running and no waiting requests."""
        return not self.running and not self.waiting

    def pending_rids(self) -> list[str]:
        """Request ids still in the system (for the SIGTERM drain log)."""
        return [r.rid for r in (*self.running, *self.waiting) if not r.finished]

    def submit(self, req: SimRequest) -> None:
        """Queue a request; it joins the next prefill batch with room."""
        self.waiting.append(req)
        self._wake.set()

    def reset_spec_counters(self) -> None:
        """`flush_cache` on an idle server resets the lifetime acceptance counters."""
        self.counters.spec_tokens = 0
        self.counters.spec_steps = 0

    @property
    def avg_spec_accept_length(self) -> float:
        """Lifetime accepted tokens per request-step (what `/server_info` reports)."""
        c = self.counters
        return c.spec_tokens / c.spec_steps if c.spec_steps else 0.0

    def _used_tokens(self) -> int:
        return sum(r.prompt_tokens + len(r.output_ids) for r in self.running)

    def _finish(self, req: SimRequest) -> None:
        if req.internal or req.aborted:
            return
        c = self.counters
        c.num_requests += 1
        c.prompt_tokens += req.prompt_tokens
        c.generation_tokens += len(req.output_ids)
        if req.first_token_at is not None:
            c.ttft.append(req.first_token_at - req.created)
        if req.finished_at is not None:
            c.e2e.append(req.finished_at - req.created)
        if len(c.ttft) > 10000:  # bounded: histograms only need recent samples
            del c.ttft[:5000], c.e2e[:5000]
        if self.on_finish is not None:
            self.on_finish(req)

    async def _sleep_until(self, loop: asyncio.AbstractEventLoop, deadline: float) -> float:
        delay = deadline - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        return time.monotonic()

    async def run(self) -> None:
        """The scheduler loop; runs until cancelled."""
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            if self.idle:
                self._wake.clear()
                await self._wake.wait()
                next_at = loop.time()
            if loop.time() - next_at > 1.0:
                next_at = loop.time()  # we were stopped or starved: resync instead of bursting
            self.running = [r for r in self.running if not r.aborted]
            new: list[SimRequest] = []
            while self.waiting and len(self.running) + len(new) < self.model.max_running:
                req = self.waiting.popleft()
                if not req.aborted:
                    new.append(req)
            if new:
                next_at = await self._prefill(loop, new, next_at)
            if not self.running:
                continue
            next_at = await self._decode(loop, next_at)

    async def _prefill(self, loop: asyncio.AbstractEventLoop, new: list[SimRequest], next_at: float) -> float:
        tokens = sum(r.prompt_tokens for r in new)
        duration = self.model.prefill_seconds(tokens) + self.first_batch_delay
        self.first_batch_delay = 0.0
        usage = (self._used_tokens() + tokens) / self.kv_tokens
        line = self.log.prefill_line(
            len(new), tokens, usage, len(self.running), len(self.waiting), tokens / max(duration, 1e-6)
        )
        if self.log.batch_lines:
            self.log.log(line, 0)
        next_at += duration
        now = await self._sleep_until(loop, next_at)
        for req in new:
            if req.aborted:
                continue
            req.advance(1, now)
            self.counters.produced += 1
            if req.finished:
                self._finish(req)
            else:
                self.running.append(req)
        return next_at

    async def _decode(self, loop: asyncio.AbstractEventLoop, next_at: float) -> float:
        bs = len(self.running)
        if self.crash_at_batch is not None and bs > self.crash_at_batch:
            self.crashed = True
            if self.on_crash is not None:
                self.on_crash()
            await asyncio.Event().wait()  # the scheduler is dead: nothing advances until we are killed
        spec = self.model.speculating(bs)
        next_at += self.model.step_seconds(bs)
        now = await self._sleep_until(loop, next_at)
        draw = self.sampler.draw
        still: list[SimRequest] = []
        gained = 0
        for req in self.running:
            if req.aborted:
                continue
            n = draw() if spec else 1
            before = len(req.output_ids)
            req.verify_ct += 1
            req.advance(n, now)
            got = len(req.output_ids) - before
            gained += got
            if spec:
                req.spec_tokens += got
                req.spec_steps += 1
                self._interval_spec_tokens += got
                self._interval_spec_steps += 1
                self.counters.spec_tokens += got
                self.counters.spec_steps += 1
                self.counters.drafts += 1
                self.counters.accepted += max(0, got - 1)
            if req.finished:
                self._finish(req)
            else:
                still.append(req)
        self.running = still
        self._interval_tokens += gained
        self.counters.produced += gained
        self._decode_steps += 1
        if self._decode_steps % self.interval == 0:
            self._log_decode(bs)
        return next_at

    def _log_decode(self, bs: int) -> None:
        now = time.monotonic()
        elapsed = now - self._interval_start
        tput = self._interval_tokens / elapsed if elapsed > 0 else 0.0
        accept: tuple[float, float] | None = None
        if self.model.spec is not None:
            steps = self._interval_spec_steps
            length = self._interval_spec_tokens / steps if steps else 1.0
            if self.log.style_2026:
                rate = (length - 1) / max(1, self.num_draft_tokens - 1)
            else:
                rate = length / max(1, self.num_draft_tokens)
            accept = (length, rate)
        used = self._used_tokens()
        usage = used / self.kv_tokens
        line = self.log.decode_line(
            len(self.running), used, usage, accept, bs <= self.graph_max_bs, tput, len(self.waiting)
        )
        if self.log.batch_lines:
            self.log.log(line, 0)
        g = self.gauges
        g.num_running_reqs, g.num_queue_reqs = len(self.running), len(self.waiting)
        g.num_used_tokens, g.token_usage, g.gen_throughput = used, usage, tput
        g.is_cuda_graph = 1.0 if bs <= self.graph_max_bs else 0.0
        if accept is not None:
            g.spec_accept_length, g.spec_accept_rate = accept
        self.last_gen_throughput = tput
        self._interval_start = now
        self._interval_tokens = self._interval_spec_tokens = self._interval_spec_steps = 0
