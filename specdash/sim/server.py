"""SGLang's HTTP surface on aiohttp: the routes, their bodies and their status codes (engines.md 2-4).

`/health` and `/health_generate` follow SGLang >= 0.5.1: 503 while warming up or draining, otherwise a
1-token probe generation through the scheduler (so probes show up as `Prefill batch, #new-seq: 1,
#new-token: 1`). `/generate` streams cumulative `text` and `meta_info.completion_tokens`; the OpenAI routes
stream deltas and, with `stream_options.include_usage`, a final `choices: []` usage chunk (with
`continuous_usage_stats`, cumulative usage on every chunk too). Access lines are
logged when a response starts, as uvicorn does, on stdout.
"""

from __future__ import annotations

import asyncio
import enum
import hashlib
import json
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from specdash.sim.args import SimConfig
from specdash.sim.logstyle import LogWriter
from specdash.sim.memory import MemoryOccupation
from specdash.sim.presets import Preset
from specdash.sim.scheduler import Scheduler, SimRequest

HEALTH_TIMEOUT = 20.0
"""SGLANG_HEALTH_CHECK_TIMEOUT."""
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
FLUSH_BODY = (
    "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, "
    "the operation will not be performed.)\n"
)


class Status(enum.Enum):
    """`server_status` of SGLang's tokenizer manager."""

    STARTING = "Starting"
    UP = "Up"
    UNHEALTHY = "UnHealthy"


def _dumps(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _sse(obj: object) -> bytes:
    return f"data: {_dumps(obj)}\n\n".encode()


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


RECEIVED = web.RequestKey("received", float)
"""When a request's first bytes were read from its socket (`ReceiptStamp`)."""
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ReceiptStamp(asyncio.Protocol):
    """aiohttp's connection protocol behind a proxy that notes when a request's first bytes were read.

    Not SGLang behaviour: the request log's ground truth. A handler starts only after the handlers of requests
    that arrived with it have run to their first wait, so its own clock misses the front end's queue (several ms
    at 64 simultaneous arrivals: `benchmarks/RESULTS.md`); every client counts that queue in its TTFT. A
    request's stamp is the first read on its connection since the previous request took its stamp
    (`SimServer._take_receipt`, once its body is in): clients send one request at a time per connection, as
    HTTP/1.1 clients do.
    """

    def __init__(self, inner: asyncio.BaseProtocol, stamps: dict[object, float]) -> None:
        self._inner = inner
        self._stamps = stamps

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self._stamps.setdefault(self._inner, time.monotonic())
        self._inner.data_received(data)  # type: ignore[attr-defined]

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()  # type: ignore[attr-defined, no-any-return]

    def connection_lost(self, exc: Exception | None) -> None:
        self._stamps.pop(self._inner, None)
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


class SimServer:
    """State shared by the routes: config, scheduler, readiness and shutdown flags."""

    def __init__(self, config: SimConfig, preset: Preset, scheduler: Scheduler, log: LogWriter) -> None:
        self.c = config
        self.preset = preset
        self.sched = scheduler
        self.log = log
        self.status = Status.STARTING
        self.gracefully_exit = False
        self.responding = 0
        """Streamed responses still being written: the SIGTERM drain waits for them as well as for the
        scheduler's requests, so a finished request's last bytes are not cut by the exit."""
        self.first_request_hook: Callable[[], None] | None = None
        """Called once on the first request: SGLang installs its SIGTERM handler lazily then."""
        self._rid_counter = 0
        self.created = int(time.time())
        self.memory: MemoryOccupation = MemoryOccupation(config, preset)
        """Memory release and resume (`specdash.sim.memory`), or vLLM's sleep mode (`specdash.sim.vllm_api`)."""
        if config.vllm:
            from specdash.sim.vllm_api import VllmSleep
            from specdash.sim.vllm_log import VllmLogWriter

            assert isinstance(log, VllmLogWriter)
            self.memory = VllmSleep(config, preset, log)
        self.receipts: dict[object, float] = {}
        """Connection protocol -> when its pending request's first bytes were read (`ReceiptStamp`)."""

    @web.middleware
    async def _take_receipt(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Every request takes its connection's stamp (`ReceiptStamp`) once its body is in, so no later read
        is counted for it and the next request on the connection starts a new stamp."""
        await request.read()
        request[RECEIVED] = self.receipts.pop(request.protocol, 0.0) or time.monotonic()
        return await handler(request)

    # ---- helpers -------------------------------------------------------------------------------

    def _first_request(self) -> None:
        hook, self.first_request_hook = self.first_request_hook, None
        if hook is not None:
            hook()

    def new_request(
        self,
        prompt_tokens: int,
        max_new: int,
        ignore_eos: bool,
        internal: bool = False,
        greedy_prompt: str | None = None,
    ) -> SimRequest:
        """A request with a seeded natural stopping point unless `ignore_eos`; `greedy_prompt` (temperature 0)
        makes its text a function of the prompt alone (see `SimRequest.word_seed`)."""
        self._rid_counter += 1
        if internal:
            rid = f"HEALTH_CHECK_{time.time()}"
        else:
            rid = uuid.UUID(int=((self.c.seed % (1 << 64)) << 64) + self._rid_counter).hex
        word_seed = None if greedy_prompt is None else hashlib.sha256(greedy_prompt.encode()).hexdigest()
        stop_at = None
        if not ignore_eos and not internal:
            # Natural length ~ exponential with mean 400 tokens, seeded per request so runs repeat; a greedy
            # request ends where its prompt says (EOS is part of the greedy text, the same in every mode).
            stop_at = 1 + int(random.Random(word_seed or rid).expovariate(1 / 400))
        return SimRequest(
            rid=rid,
            prompt_tokens=max(1, prompt_tokens),
            max_new_tokens=max(1, max_new),
            stop_at=stop_at,
            internal=internal,
            word_seed=word_seed,
            diverge_at=0
            if greedy_prompt is not None and self.memory.corrupt
            else self.c.faults.spec_diverge
            if greedy_prompt is not None and self.c.speculative_algorithm
            else None,
        )

    def server_args(self) -> dict[str, Any]:
        """Server args as `/server_info` shows them."""
        c = self.c
        return {
            "model_path": c.model_path,
            "tokenizer_path": c.tokenizer_path,
            "served_model_name": c.served_model_name,
            "host": c.host,
            "port": c.port,
            "tp_size": c.tp_size,
            "dp_size": 1,
            "context_length": c.context_length,
            "max_running_requests": c.max_running_requests,
            "cuda_graph_max_bs": c.cuda_graph_max_bs,
            "enable_metrics": c.enable_metrics,
            "disable_overlap_schedule": c.disable_overlap_schedule,
            "speculative_algorithm": c.speculative_algorithm,
            "speculative_draft_model_path": c.speculative_draft_model_path,
            "speculative_num_steps": c.speculative_num_steps,
            "speculative_eagle_topk": c.speculative_eagle_topk,
            "speculative_num_draft_tokens": c.speculative_num_draft_tokens,
            "decode_log_interval": c.decode_log_interval,
            "random_seed": c.seed,
            "skip_server_warmup": c.skip_server_warmup,
        }

    # ---- app -----------------------------------------------------------------------------------

    def make_app(self) -> web.Application:
        """The aiohttp application with SGLang's routes."""
        app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=[self._take_receipt])
        app.on_response_prepare.append(self._access_log)
        r = app.router
        r.add_get("/health", self.health)
        r.add_get("/health_generate", self.health)
        r.add_get("/get_model_info", self.model_info)
        r.add_get("/model_info", self.model_info)
        r.add_get("/get_server_info", self.server_info)
        r.add_get("/server_info", self.server_info)
        r.add_get("/v1/models", self.models)
        r.add_post("/generate", self.generate)
        r.add_put("/generate", self.generate)
        r.add_post("/v1/completions", self.openai)
        r.add_post("/v1/chat/completions", self.openai)
        r.add_route("*", "/flush_cache", self.flush_cache)
        self.memory.routes(app)
        if self.c.enable_metrics or self.c.vllm:  # vLLM always serves /metrics
            r.add_get("/metrics", self.metrics)
        return app

    async def _access_log(self, request: web.Request, response: web.StreamResponse) -> None:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        host = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else "127.0.0.1:0"
        path = request.path_qs
        self.log.access(host, request.method, path, response.status)

    # ---- routes --------------------------------------------------------------------------------

    async def health(self, request: web.Request) -> web.Response:
        """503 while starting or draining; else a 1-token probe through the scheduler."""
        if self.gracefully_exit:
            self.log.log("Health check request received during shutdown. Returning 503.")
            return web.Response(status=503)
        if self.status is Status.STARTING:
            return web.Response(status=503)
        if self.c.vllm:
            return web.Response(status=200)  # vLLM's /health asks the engine whether it is alive (asleep too)
        tic = time.time()
        slow = self.c.faults.slow_health
        if slow is not None:
            await asyncio.sleep(min(slow, HEALTH_TIMEOUT))
            if slow >= HEALTH_TIMEOUT:
                return self._health_failed(tic)
        self._first_request()
        req = self.new_request(1, 1, ignore_eos=True, internal=True)
        self.sched.submit(req)
        try:
            await asyncio.wait_for(req.wait_progress(0), HEALTH_TIMEOUT)
        except TimeoutError:
            req.abort()
            return self._health_failed(tic)
        return web.Response(status=200)

    def _health_failed(self, tic: float) -> web.Response:
        self.status = Status.UNHEALTHY
        fmt = "%H:%M:%S"
        self.log.log(
            f"Health check failed. Server couldn't get a response from detokenizer for last {HEALTH_TIMEOUT:.0f} "
            f"seconds. tic start time: {time.strftime(fmt, time.localtime(tic))}. last_heartbeat time: "
            f"{time.strftime(fmt, time.localtime(tic - 1))}"
        )
        return web.Response(status=503)

    async def model_info(self, request: web.Request) -> web.Response:
        """`/model_info` (and the deprecated `/get_model_info`)."""
        if request.path.startswith("/get_"):
            self.log.log(
                "Endpoint '/get_model_info' is deprecated and will be removed in a future version. "
                "Please use '/model_info' instead."
            )
        return web.json_response(
            {
                "model_path": self.c.model_path,
                "tokenizer_path": self.c.tokenizer_path,
                "is_generation": True,
                "preferred_sampling_params": None,
                "weight_version": "default",
                "has_image_understanding": False,
                "has_audio_understanding": False,
                "model_type": self.preset.model_type,
                "architectures": [self.preset.architecture],
            },
            dumps=_dumps,
        )

    async def server_info(self, request: web.Request) -> web.Response:
        """`/server_info` (and the deprecated `/get_server_info`): args, scheduler info, internal states."""
        if request.path.startswith("/get_"):
            self.log.log(
                "Endpoint '/get_server_info' is deprecated and will be removed in a future version. "
                "Please use '/server_info' instead."
            )
        args = self.server_args()
        state: dict[str, Any] = {
            **args,
            "last_gen_throughput": self.sched.last_gen_throughput,
            "memory_usage": {
                "weight": self.preset.weight_gb,
                "kvcache": self.preset.kv_gb,
                "token_capacity": self.preset.kv_tokens,
                "graph": 1.3,
            },
        }
        if self.c.speculative_algorithm:
            state["avg_spec_accept_length"] = self.sched.avg_spec_accept_length
        body = {
            **args,
            "max_total_num_tokens": self.preset.kv_tokens,
            "max_req_input_len": (self.c.context_length or self.preset.context_len) - 1,
            "internal_states": [state],
            "version": "0.5.18" if self.c.style_2026 else "0.5.6.post2",
        }
        return web.json_response(body, dumps=_dumps)

    async def models(self, request: web.Request) -> web.Response:
        """`/v1/models`."""
        name = self.c.served_model_name
        card = {
            "id": name,
            "object": "model",
            "created": self.created,
            "owned_by": "vllm" if self.c.vllm else "sglang",
            "root": name,
            "parent": None,
            "max_model_len": self.c.context_length or self.preset.context_len,
        }
        return web.json_response({"object": "list", "data": [card]}, dumps=_dumps)

    async def flush_cache(self, request: web.Request) -> web.Response:
        """Resets lifetime counters only when idle; answers 200 either way, like SGLang."""
        if self.sched.idle:
            self.sched.reset_spec_counters()
            self.log.log("Cache flushed successfully!", 0)
        else:
            self.log.log(
                f"Cache not flushed because there are pending requests. #queue-req: {len(self.sched.waiting)}, "
                f"#running-req: {len(self.sched.running)}",
                0,
            )
        return web.Response(text=FLUSH_BODY)

    def _meta(self, req: SimRequest, final: bool) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "id": req.rid,
            "finish_reason": req.finish_reason if final else None,
            "prompt_tokens": req.prompt_tokens,
            "weight_version": "default",
            "total_retractions": 0,
            "completion_tokens": req.completion_tokens,
            "cached_tokens": 0,
        }
        if final:
            end = req.finished_at or time.monotonic()
            meta["e2e_latency"] = end - req.created
            if self.c.speculative_algorithm:
                verify = max(1, req.verify_ct)
                accepted = max(0, req.completion_tokens - verify)
                drafted = verify * (self.c.speculative_num_steps or 1)
                meta["spec_verify_ct"] = req.verify_ct
                meta["spec_accept_length"] = req.completion_tokens / verify
                meta["spec_accept_rate"] = accepted / drafted if drafted else 0.0
                meta["spec_accept_token_num"] = accepted
                meta["spec_draft_token_num"] = drafted
        return meta

    @staticmethod
    async def _body(request: web.Request) -> dict[str, Any] | None:
        try:
            body = await request.json()
        except ValueError:
            return None
        return body if isinstance(body, dict) else None

    @staticmethod
    def _bad_request() -> web.Response:
        # SGLang (FastAPI) answers malformed bodies with 400 and an error object, never a 500.
        return web.json_response({"error": {"message": "Invalid request body: expected a JSON object."}}, status=400)

    def _shutting_down(self) -> web.Response | None:
        if self.gracefully_exit:
            return web.json_response({"error": {"message": "The server is shutting down."}}, status=503, dumps=_dumps)
        return self.memory.refusal()

    async def generate(self, request: web.Request) -> web.StreamResponse:
        """Native `/generate`: SSE with cumulative text and counts, or one JSON body."""
        self._first_request()
        if (refused := self._shutting_down()) is not None:
            return refused
        body = await self._body(request)
        if body is None:
            return self._bad_request()
        sp = body.get("sampling_params") or {}
        if body.get("input_ids") is not None:
            prompt = len(body["input_ids"])
        else:
            prompt = _estimate_tokens(str(body.get("text") or ""))
        greedy = str(body.get("text") or body.get("input_ids")) if sp.get("temperature") == 0 else None
        req = self.new_request(prompt, int(sp.get("max_new_tokens") or 128), bool(sp.get("ignore_eos")), False, greedy)
        req.received = request[RECEIVED]
        self.sched.submit(req)
        if not body.get("stream"):
            await req.wait_progress(req.max_new_tokens + 1)
            return web.json_response(
                {"text": req.text, "output_ids": req.output_ids, "meta_info": self._meta(req, True)}, dumps=_dumps
            )
        resp = web.StreamResponse(headers=SSE_HEADERS)
        self.responding += 1
        try:
            await resp.prepare(request)
            seen = 0
            while True:
                await req.wait_progress(seen)
                seen = req.completion_tokens
                final = req.finished
                chunk = {"text": req.text, "output_ids": req.output_ids, "meta_info": self._meta(req, final)}
                await resp.write(_sse(chunk))
                if req.first_sent is None and seen:
                    req.first_sent = time.monotonic()
                if final:
                    break
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            req.abort()
            raise
        finally:
            self.responding -= 1
        return resp

    async def openai(self, request: web.Request) -> web.StreamResponse:
        """`/v1/completions` and `/v1/chat/completions`."""
        self._first_request()
        if (refused := self._shutting_down()) is not None:
            return refused
        body = await self._body(request)
        if body is None:
            return self._bad_request()
        chat = request.path.endswith("/chat/completions")
        if chat:
            messages = body.get("messages") or []
            prompt = sum(_estimate_tokens(str(m.get("content") or "")) + 4 for m in messages) + 3
            max_new = body.get("max_completion_tokens") or body.get("max_tokens")
            default_max = (self.c.context_length or self.preset.context_len) - prompt
        else:
            prompt = _estimate_tokens(str(body.get("prompt") or ""))
            max_new = body.get("max_tokens")
            default_max = 16
        greedy = None
        if body.get("temperature") == 0:
            greedy = json.dumps(body.get("messages")) if chat else str(body.get("prompt") or "")
        req = self.new_request(prompt, int(max_new or default_max), bool(body.get("ignore_eos")), False, greedy)
        req.received = request[RECEIVED]
        self.sched.submit(req)
        model = body.get("model") or self.c.served_model_name
        kind = "chat.completion" if chat else "text_completion"
        if not body.get("stream"):
            await req.wait_progress(req.max_new_tokens + 1)
            return web.json_response(self._openai_full(req, chat, kind, model), dumps=_dumps)
        options = body.get("stream_options") or {}
        include_usage = bool(options.get("include_usage"))
        continuous = bool(options.get("continuous_usage_stats"))
        resp = web.StreamResponse(headers=SSE_HEADERS)
        base = {"id": req.rid, "object": f"{kind}.chunk" if chat else kind, "created": int(time.time()), "model": model}
        seen_chars = 0
        seen = 0
        self.responding += 1
        try:
            await resp.prepare(request)
            if chat:
                first = {"role": "assistant", "content": ""}
                await resp.write(_sse({**base, "choices": [self._choice(chat, first, None)], "usage": None}))
            while True:
                await req.wait_progress(seen)
                seen = req.completion_tokens
                delta, seen_chars = req.text[seen_chars:], len(req.text)
                reason = self._openai_reason(req) if req.finished else None
                content: Any = {"role": None, "content": delta} if chat else delta
                usage = self._usage(req) if continuous else None
                await resp.write(_sse({**base, "choices": [self._choice(chat, content, reason, req)], "usage": usage}))
                if req.first_sent is None and seen:
                    req.first_sent = time.monotonic()
                if req.finished:
                    break
            if include_usage:
                await resp.write(_sse({**base, "choices": [], "usage": self._usage(req)}))
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            req.abort()
            raise
        finally:
            self.responding -= 1
        return resp

    @staticmethod
    def _openai_reason(req: SimRequest) -> str | None:
        reason = req.finish_reason or {}
        return {"length": "length", "stop": "stop", "abort": "abort"}.get(str(reason.get("type")))

    @staticmethod
    def _choice(chat: bool, content: Any, reason: str | None, req: SimRequest | None = None) -> dict[str, Any]:
        matched = EOS_MATCH if req is not None and reason == "stop" else None
        choice: dict[str, Any] = {"index": 0}
        choice["delta" if chat else "text"] = content
        choice.update({"logprobs": None, "finish_reason": reason, "matched_stop": matched})
        return choice

    @staticmethod
    def _usage(req: SimRequest) -> dict[str, Any]:
        return {
            "prompt_tokens": req.prompt_tokens,
            "total_tokens": req.prompt_tokens + req.completion_tokens,
            "completion_tokens": req.completion_tokens,
            "prompt_tokens_details": None,
            "reasoning_tokens": 0,
        }

    def _openai_full(self, req: SimRequest, chat: bool, kind: str, model: str) -> dict[str, Any]:
        reason = self._openai_reason(req)
        choice: dict[str, Any] = {"index": 0}
        if chat:
            choice["message"] = {
                "role": "assistant",
                "content": req.text,
                "reasoning_content": None,
                "tool_calls": None,
            }
        else:
            choice["text"] = req.text
        choice.update(
            {"logprobs": None, "finish_reason": reason, "matched_stop": EOS_MATCH if reason == "stop" else None}
        )
        if chat and self.c.speculative_algorithm:
            choice["meta_info"] = self._meta(req, True)
        return {
            "id": req.rid,
            "object": kind,
            "created": int(time.time()),
            "model": model,
            "choices": [choice],
            "usage": self._usage(req),
            "metadata": {"weight_version": "default"},
        }

    async def metrics(self, request: web.Request) -> web.Response:
        """Prometheus text with SGLang's metric names (`--enable-metrics`)."""
        from specdash.sim.metrics import render_metrics
        from specdash.sim.vllm_api import render_vllm_metrics

        text = render_vllm_metrics(self.c, self.sched) if self.c.vllm else render_metrics(self.c, self.sched)
        return web.Response(text=text, content_type="text/plain", charset="utf-8")


EOS_MATCH = 163586
"""`matched_stop` on a natural stop (the EOS token id)."""
