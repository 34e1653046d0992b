"""A tiny, controllable SSE server for probe tests and the probe-cost benchmark (not the simulator).

It speaks the three streaming endpoints the probe uses, with the wire formats of engines.md §3, and
misbehaves on request: K tokens per chunk, a pace, HTTP 500, malformed SSE, a reset or a stall mid-stream,
no `[DONE]`, an in-stream error, fewer tokens than asked, no usage. Behaviour is taken, per request in
arrival order, from `FakeConfig.script`, then `FakeConfig.behaviour`.

For benchmarks it also counts what it sent, so clients are compared on the server's events, not their own:
`GET /bench/counters` gives requests, content chunks and tokens sent in finished streams, and the seconds
during which at least one stream was open; `GET /bench/wait?requests=K&timeout=T` answers the same once more
than K streaming requests have arrived (or T seconds have passed), so a caller learns when a client's first
request came in without polling.

Run standalone (for benchmarks): `python -m tests.support.fake_server --port P --k 1 --interval 0.01`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

BEHAVIOURS = ("ok", "http500", "malformed", "bad_json", "reset", "stall", "no_done", "error_event", "short")


@dataclass
class FakeConfig:
    """How the fake server answers (mutable: tests change it between requests)."""

    tokens_per_chunk: int = 1
    """K: tokens carried by each content chunk (K > 1 mimics speculative decoding)."""
    interval_s: float = 0.0
    """Pause between chunks."""
    behaviour: str = "ok"
    """Default behaviour, one of `BEHAVIOURS`."""
    script: list[str] = field(default_factory=list)
    """Per-request behaviours, consumed in arrival order before `behaviour` applies."""
    fail_after_chunks: int = 2
    """For reset/stall/malformed/no_done/error_event: how many good chunks come first."""
    short_tokens: int = 5
    """For `short`: how many tokens are generated."""
    usage: bool = True
    """OpenAI endpoints: honour `include_usage` (False mimics a server that never sends usage)."""
    continuous_usage: bool = True
    """OpenAI endpoints: honour `continuous_usage_stats`."""
    spaces: bool = False
    """Serialise JSON with spaces after separators (Python's default) instead of compactly (orjson)."""
    requests: int = 0
    """Requests received so far."""
    generated_tokens: int = 0
    """Tokens sent in finished streams (the `generation_tokens_total` counter)."""
    max_running_requests: int | None = None
    """Reported in `/server_info` when set."""
    engine: str = "sglang"
    """`sglang` (`/server_info`, `sglang:` metrics) or `vllm` (`/version`, `vllm:` metrics, no `/server_info`)."""
    chunks_sent: int = 0
    """Content chunks sent in finished streams (vLLM's `spec_decode_num_drafts_total` in this model)."""
    die_after_requests: int | None = None
    """Crash after this many requests: reset every open connection and stop listening (a dead server)."""


def _dumps(obj: Any, spaces: bool) -> bytes:
    return json.dumps(obj, separators=(", ", ": ") if spaces else (",", ":")).encode()


class FakeServer:
    """The aiohttp application and its runner, on a loopback port."""

    def __init__(self, config: FakeConfig | None = None) -> None:
        """Create the app (not yet listening)."""
        self.config = config or FakeConfig()
        self.app = web.Application()
        self.app.router.add_post("/generate", self._stream)
        self.app.router.add_post("/v1/completions", self._stream)
        self.app.router.add_post("/v1/chat/completions", self._stream)
        self.app.router.add_get("/v1/models", self._models)
        self.app.router.add_get("/metrics", self._metrics)
        self.app.router.add_get("/server_info", self._server_info)
        self.app.router.add_post("/flush_cache", self._flush)
        self.app.router.add_get("/version", self._version)
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.flushes = 0
        self.health_calls = 0
        self.metrics_readers: list[str] = []
        """The User-Agent of each `/metrics` request, in order."""
        self.app.router.add_get("/health", self._health)
        self.app.router.add_get("/bench/counters", self._counters)
        self.app.router.add_get("/bench/wait", self._wait)
        self._transports: set[asyncio.Transport] = set()
        self._dying: asyncio.Task[None] | None = None
        self._open_streams = 0
        self._busy_since = 0.0
        self._busy_s = 0.0
        self._arrived = asyncio.Event()

    async def start(self, port: int = 0) -> int:
        """Listen on 127.0.0.1 (`port` 0 picks a free one); return the port."""
        self._runner = web.AppRunner(self.app, access_log=None, handle_signals=False, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        server = site._server
        assert server is not None
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        """Stop listening and close connections."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def url(self) -> str:
        """The base URL."""
        return f"http://127.0.0.1:{self.port}"

    async def _models(self, request: web.Request) -> web.Response:
        # Both engines name themselves in `owned_by`, as the real ones do.
        model = {"id": "fake-model", "object": "model", "owned_by": self.config.engine}
        return web.json_response({"object": "list", "data": [model]})

    async def _health(self, request: web.Request) -> web.Response:
        self.health_calls += 1
        return web.Response(text="")

    async def _flush(self, request: web.Request) -> web.Response:
        self.flushes += 1
        return web.Response(text="Cache flushed.\n")

    async def _version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": "0.32.0"})

    async def _server_info(self, request: web.Request) -> web.Response:
        if self.config.engine == "vllm":
            raise web.HTTPNotFound()
        info: dict[str, Any] = {"version": "fake", "internal_states": [{"avg_spec_accept_length": 2.5}]}
        if self.config.max_running_requests is not None:
            info["max_running_requests"] = self.config.max_running_requests
        return web.json_response(info)

    async def _metrics(self, request: web.Request) -> web.Response:
        self.metrics_readers.append(request.headers.get("User-Agent", ""))
        cfg = self.config
        if cfg.engine == "vllm":
            # One verify step per chunk: accepted = tokens - steps, so acceptance length = tokens / chunks.
            text = (
                f"vllm:generation_tokens_total {float(cfg.generated_tokens)}\n"
                f"vllm:spec_decode_num_drafts_total {float(cfg.chunks_sent)}\n"
                f"vllm:spec_decode_num_accepted_tokens_total {float(cfg.generated_tokens - cfg.chunks_sent)}\n"
                "vllm:num_requests_running 0.0\n"
            )
            return web.Response(text=text)
        text = (
            "# TYPE sglang:generation_tokens_total counter\n"
            f'sglang:generation_tokens_total{{model_name="fake"}} {float(self.config.generated_tokens)}\n'
            f'sglang:num_running_reqs{{model_name="fake",tp_rank="0"}} 0.0\n'
        )
        return web.Response(text=text)

    def _counter_values(self) -> dict[str, Any]:
        busy = self._busy_s
        if self._open_streams:
            busy += time.perf_counter() - self._busy_since
        cfg = self.config
        return {
            "requests": cfg.requests,
            "chunks": cfg.chunks_sent,
            "tokens": cfg.generated_tokens,
            "open_streams": self._open_streams,
            "busy_s": busy,
        }

    async def _counters(self, request: web.Request) -> web.Response:
        return web.json_response(self._counter_values())

    async def _wait(self, request: web.Request) -> web.Response:
        after = int(request.query.get("requests", "0"))
        deadline = time.perf_counter() + min(float(request.query.get("timeout", "60")), 3600.0)
        while self.config.requests <= after and (left := deadline - time.perf_counter()) > 0:
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), left)
            except TimeoutError:
                break
        return web.json_response(self._counter_values())

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        if self._open_streams == 0:
            self._busy_since = time.perf_counter()
        self._open_streams += 1
        try:
            return await self._serve_stream(request)
        finally:
            self._open_streams -= 1
            if self._open_streams == 0:
                self._busy_s += time.perf_counter() - self._busy_since

    async def _serve_stream(self, request: web.Request) -> web.StreamResponse:
        cfg = self.config
        cfg.requests += 1
        self._arrived.set()
        behaviour = cfg.script.pop(0) if cfg.script else cfg.behaviour
        transport = request.transport
        if transport is not None:
            self._transports.add(transport)
        if cfg.die_after_requests is not None and cfg.requests > cfg.die_after_requests:
            if self._dying is None:
                self._dying = asyncio.create_task(self._die())
            if transport is not None:
                _reset(transport)
            return web.Response(status=503)
        body = await request.json()
        generate = request.path == "/generate"
        chat = request.path.endswith("/chat/completions")
        if generate:
            n = int(body["sampling_params"]["max_new_tokens"])
            opts: dict[str, Any] = {}
        else:
            n = int(body["max_tokens"])
            opts = body.get("stream_options") or {}
        if behaviour == "http500":
            return web.json_response({"error": {"message": "boom"}}, status=500)
        if behaviour == "short":
            n = min(n, cfg.short_tokens)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        k = max(1, cfg.tokens_per_chunk)
        include_usage = cfg.usage and bool(opts.get("include_usage"))
        continuous = include_usage and cfg.continuous_usage and bool(opts.get("continuous_usage_stats"))
        sent = 0
        chunk_no = 0
        if chat and not generate:
            first: dict[str, Any] = {
                "id": "c",
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
            }
            if continuous:
                first["usage"] = {"prompt_tokens": 7, "completion_tokens": 0, "total_tokens": 7}
            await resp.write(b"data: " + _dumps(first, cfg.spaces) + b"\n\n")
        while sent < n:
            if chunk_no == cfg.fail_after_chunks and behaviour in (
                "reset",
                "stall",
                "malformed",
                "bad_json",
                "no_done",
                "error_event",
            ):
                return await self._misbehave(behaviour, request, resp)
            step = min(k, n - sent)
            sent += step
            chunk_no += 1
            text = "tok " * step
            if generate:
                obj: dict[str, Any] = {
                    "text": "tok " * sent,
                    "output_ids": list(range(sent)),
                    "meta_info": {"id": "r", "finish_reason": None, "prompt_tokens": 7, "completion_tokens": sent},
                }
                if sent == n:
                    obj["meta_info"]["finish_reason"] = {"type": "length", "length": n}
                    if k > 1:
                        obj["meta_info"]["spec_accept_length"] = float(k)
            elif chat:
                obj = {
                    "id": "c",
                    "object": "chat.completion.chunk",
                    "choices": [{"index": 0, "delta": {"content": text}}],
                }
            else:
                obj = {"id": "c", "object": "text_completion", "choices": [{"index": 0, "text": text}]}
            if continuous:
                obj["usage"] = {"prompt_tokens": 7, "completion_tokens": sent, "total_tokens": 7 + sent}
            await resp.write(b"data: " + _dumps(obj, cfg.spaces) + b"\n\n")
            if cfg.interval_s > 0:
                await asyncio.sleep(cfg.interval_s)
        if include_usage and not generate:
            usage = {
                "id": "c",
                "choices": [],
                "usage": {"prompt_tokens": 7, "completion_tokens": sent, "total_tokens": 7 + sent},
            }
            await resp.write(b"data: " + _dumps(usage, cfg.spaces) + b"\n\n")
        cfg.generated_tokens += sent
        cfg.chunks_sent += chunk_no
        if behaviour != "no_done":
            await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def _die(self) -> None:
        for t in list(self._transports):
            _reset(t)
        await self.stop()

    async def _misbehave(self, behaviour: str, request: web.Request, resp: web.StreamResponse) -> web.StreamResponse:
        if behaviour == "malformed":
            await resp.write(b"this is not sse\n\n")
        elif behaviour == "bad_json":
            await resp.write(b"data: {not json\n\n")
        elif behaviour == "error_event":
            await resp.write(b'data: {"error":{"message":"out of memory"}}\n\n')
        elif behaviour == "no_done":
            await resp.write_eof()
            return resp
        elif behaviour == "reset":
            assert request.transport is not None
            _reset(request.transport)
            return resp
        elif behaviour == "stall":
            await asyncio.Event().wait()
        await asyncio.sleep(3600)  # malformed/error_event: hold the stream open; the client must give up
        return resp


def _reset(transport: asyncio.Transport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None:
        # SO_LINGER 0 turns close() into a TCP RST: a real reset, not a clean FIN.
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    transport.abort()


async def _serve_forever(port: int, config: FakeConfig) -> None:
    server = FakeServer(config)
    actual = await server.start(port)
    print(f"listening {actual}", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    """Run the fake server standalone (used by benchmarks/probe_cost.py)."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--k", type=int, default=1, help="tokens per chunk")
    ap.add_argument("--interval", type=float, default=0.0, help="seconds between chunks")
    args = ap.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(_serve_forever(args.port, FakeConfig(tokens_per_chunk=args.k, interval_s=args.interval)))


if __name__ == "__main__":
    main()
