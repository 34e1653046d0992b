"""vLLM 0.24's server surface in the simulator (`--sim-log-style vllm-0.24`): sleep mode, `/metrics` with vLLM's
names, and the stats logger's `Engine 000:` / `SpecDecoding metrics:` lines.

Sleep mode (the real H100, `tests/fixtures/logs/vllm_h100_real/*sleep_wake*`): `POST /sleep?level=N`,
`POST /wake_up` and `GET /is_sleeping` exist only with `--enable-sleep-mode` and `VLLM_SERVER_DEV_MODE=1`
(404 otherwise). A sleep takes about 1.24 s and leaves each GPU holding 1.27 GiB; a wake takes 0.086 s; both are
scaled by `--sim-time-scale`. `/health` stays 200 while asleep; only `/is_sleeping` tells. Level 1 keeps the
weights in host RAM; level 2 discards them (a woken server then answers garbage). The faults of
`specdash.sim.faults` (sleep-500, sleep-holds-memory, wake-404, wake-500, wake-hangs, wake-corrupts) break these
routes as they break SGLang's.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from aiohttp import web

from specdash.sim.gpus import write_sleep
from specdash.sim.memory import MemoryOccupation
from specdash.sim.vllm_log import ASLEEP_GIB, SLEEP_S, WAKE_S, VllmLogWriter

if TYPE_CHECKING:
    from specdash.sim.args import SimConfig
    from specdash.sim.presets import Preset
    from specdash.sim.scheduler import Scheduler

STATS_EVERY_S = 10.0
"""vLLM's stats logger interval (VLLM_LOG_STATS_INTERVAL)."""


class VllmSleep(MemoryOccupation):
    """vLLM's sleep and wake on the simulated GPUs (the release state of `MemoryOccupation`)."""

    def __init__(self, config: SimConfig, preset: Preset, log: VllmLogWriter) -> None:
        super().__init__(config, preset)
        self.log = log
        self.engine_pid = 0
        """The EngineCore's pid (the first rank child), for its lines."""

    def routes(self, app: web.Application) -> None:
        """The three routes, only where vLLM has them."""
        if not self.c.sleep_endpoints:
            return
        app.router.add_post("/sleep", self.sleep)
        app.router.add_post("/wake_up", self.wake)
        app.router.add_get("/is_sleeping", self.is_sleeping)

    def _engine(self, source: str, message: str) -> None:
        self.log.vlog(source, message, proc="EngineCore", pid=self.engine_pid)

    async def sleep(self, request: web.Request) -> web.Response:
        """`POST /sleep?level=N`: an empty 200 once asleep."""
        f = self.c.faults
        try:
            level = int(request.query.get("level", "1"))
        except ValueError:
            level = 1
        if f.sleep_500:
            return web.json_response({"error": "Sleep failed: CuMemAllocator raised cudaErrorInvalidValue"}, status=500)
        async with self.busy:
            if not self.released:
                awake_gib = self.p.weight_gb + self.p.kv_gb + 0.9
                backed = self.p.weight_gb if level == 1 else 0.0
                tic = time.monotonic()
                await asyncio.sleep(SLEEP_S * self.c.time_scale)
                self.released = True
                if not f.sleep_holds_memory:
                    write_sleep(ASLEEP_GIB * 1024.0)
                if level >= 2:
                    self.corrupt = True  # the weights were discarded: a woken server answers garbage
                self._engine("block_pool.py:685", "Successfully reset prefix cache")
                self._engine(
                    "cumem.py:206",
                    f"CuMemAllocator: sleep freed {awake_gib:.2f} GiB memory in total, of which {backed:.2f} GiB is "
                    f"backed up in CPU and the rest {awake_gib - backed:.2f} GiB is discarded directly.",
                )
                self._engine(
                    "gpu_worker.py:181",
                    f"Sleep mode freed {awake_gib:.2f} GiB memory, {ASLEEP_GIB:.2f} GiB memory is still in use.",
                )
                self._engine("abstract.py:327", f"It took {time.monotonic() - tic:.6f} seconds to fall asleep.")
        return web.Response(status=200)

    async def wake(self, request: web.Request) -> web.Response:
        """`POST /wake_up`: an empty 200 once awake."""
        f = self.c.faults
        if f.wake_404:
            return web.json_response({"detail": "Not Found"}, status=404)
        if f.wake_500:
            return web.json_response({"error": "Wake up failed: CUDA error: out of memory"}, status=500)
        tags = request.query.getall("tags", [])
        self.log.vlog("api_router.py:38", f"wake up the engine with tags: {tags or None}")
        async with self.busy:
            if f.wake_hangs:
                await asyncio.Event().wait()  # never finishes: the client's deadline ends it
            tic = time.monotonic()
            if self.released:
                await asyncio.sleep(WAKE_S * self.c.time_scale)
                write_sleep(None)
                self.released = False
                if f.wake_corrupts:
                    self.corrupt = True
            self._engine(
                "abstract.py:345",
                f"It took {time.monotonic() - tic:.6f} seconds to wake up tags {{'weights', 'kv_cache'}}.",
            )
        return web.Response(status=200)

    async def is_sleeping(self, request: web.Request) -> web.Response:
        """`GET /is_sleeping`: `{"is_sleeping": bool}`."""
        return web.json_response({"is_sleeping": self.released})

    def refusal(self) -> web.Response | None:
        """vLLM queues a request that comes while it sleeps; the simulator refuses it (never relied upon)."""
        if self.released:
            return web.json_response({"error": "The engine is sleeping; wake it up first."}, status=503)
        return None


def _counter(name: str, help_text: str, labels: str, value: float) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} counter", f"{name}{labels} {float(value)}"]


def _gauge(name: str, help_text: str, labels: str, value: float) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", f"{name}{labels} {float(value)}"]


def render_vllm_metrics(config: SimConfig, sched: Scheduler) -> str:
    """vLLM's `/metrics` names (reference/engines.md): what specdash's readers take from a vLLM server."""
    labels = f'{{engine="0",model_name="{config.served_model_name}"}}'
    c = sched.counters
    lines = [
        *_gauge(
            "vllm:num_requests_running", "Number of requests in model execution batches.", labels, len(sched.running)
        ),
        *_gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", labels, len(sched.waiting)),
        *_gauge(
            "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", labels, sched.gauges.token_usage
        ),
        *_counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", labels, c.prompt_tokens),
        *_counter("vllm:generation_tokens_total", "Number of generation tokens processed.", labels, c.produced),
        *_counter("vllm:request_success_total", "Count of successfully processed requests.", labels, c.num_requests),
    ]
    if config.speculative_algorithm:
        k = config.speculative_num_steps or 1
        lines += _counter("vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.", labels, c.drafts)
        lines += _counter("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.", labels, c.drafts * k)
        lines += _counter(
            "vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.", labels, c.accepted
        )
    return "\n".join(lines) + "\n"


class StatsLogger:
    """vLLM's periodic `Engine 000:` line (and `SpecDecoding metrics:` when speculating), while there is work."""

    def __init__(self, config: SimConfig, sched: Scheduler, log: VllmLogWriter) -> None:
        self.c = config
        self.sched = sched
        self.log = log

    async def run(self) -> None:
        """Log every STATS_EVERY_S seconds (real time: token rates stay real at any time scale)."""
        c = self.sched.counters
        last = (time.monotonic(), c.prompt_tokens, c.produced, c.drafts, c.accepted)
        idle_logged = True
        while True:
            await asyncio.sleep(STATS_EVERY_S)
            now = (time.monotonic(), c.prompt_tokens, c.produced, c.drafts, c.accepted)
            dt = max(1e-6, now[0] - last[0])
            busy = now[2] != last[2] or self.sched.running or self.sched.waiting
            if busy or not idle_logged:
                usage = self.sched.gauges.token_usage * 100
                self.log.vlog(
                    "loggers.py:273",
                    f"Engine 000: Avg prompt throughput: {(now[1] - last[1]) / dt:.1f} tokens/s, "
                    f"Avg generation throughput: {(now[2] - last[2]) / dt:.1f} tokens/s, "
                    f"Running: {len(self.sched.running)} reqs, Waiting: {len(self.sched.waiting)} reqs, "
                    f"GPU KV cache usage: {usage:.1f}%, Prefix cache hit rate: 0.0%",
                )
                drafts, accepted = now[3] - last[3], now[4] - last[4]
                if self.c.speculative_algorithm and drafts:
                    k = self.c.speculative_num_steps or 1
                    self.log.vlog(
                        "metrics.py:120",
                        f"SpecDecoding metrics: Mean acceptance length: {1 + accepted / drafts:.2f}, "
                        f"Accepted throughput: {accepted / dt:.2f} tokens/s, "
                        f"Drafted throughput: {drafts * k / dt:.2f} tokens/s, Accepted: {accepted} tokens, "
                        f"Drafted: {drafts * k} tokens, "
                        f"Avg Draft acceptance rate: {100 * accepted / (drafts * k):.1f}%",
                    )
            idle_logged = not busy
            last = now
