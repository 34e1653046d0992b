"""vLLM 0.24's wording (`--sim-log-style vllm-0.24`): its line format and its startup script, copied from the
real H100 logs (`tests/fixtures/logs/vllm_h100_real/`).

Every line carries its process: `(APIServer pid=N) INFO MM-DD HH:MM:SS [file.py:line] message` from the main
process, `(EngineCore pid=N) ...` from the engine (here: the first rank child); uvicorn's own lines are
`(APIServer pid=N) INFO:     message`. tqdm bars are drawn as vLLM's are: each shard redraw on its own
prefixed line starting with `\\r`, the capture bars redrawn with `\\r` on one prefixed line.

The startup, in vLLM's order (unscaled seconds, the real H100 run of a 730M model where vLLM decides them):
engine init -> dist init -> the target's shard bar and `Loading weights took` -> the drafter (n-gram prints
`Loading drafter model...` and loads nothing; EAGLE-3, model runner V2, loads the draft's own shard bar 1/1)
-> torch.compile (cold: `Compiling a graph ...` and `saved AOT compiled function`; from the cache entry of
`specdash.sim.startup.compile_cache_entry`: `Directly load the compiled graph(s) ...`, about a fifth of the time;
EAGLE-3 compiles its `eagle_head` too) -> KV cache sizing -> graph capture (PIECEWISE then FULL; EAGLE-3's
`Capturing model for speculator...` and its prefill/decode graphs) -> `Graph capturing finished` -> the silent
seconds (kernel warm-up, no line) -> `init engine (...) took` -> the API server's routes and uvicorn.
Only the engine's first rank prints (vLLM's workers say little): the other ranks keep the schedule silently
and report their GPU's memory.
"""

from __future__ import annotations

import hashlib
import os
import time
from http import HTTPStatus

from specdash.sim.args import SimConfig
from specdash.sim.logstyle import TQDM_BLOCKS, LogWriter, shard_bar, tqdm_tail
from specdash.sim.presets import capture_batch_sizes
from specdash.sim.startup import MIN_PHASE, RankScript, compile_cache_entry

VERSION = "0.24.0"
DYNAMO_S = (3.41, 1.60)
"""Dynamo bytecode transform, cold and from the cache (H100 log)."""
COMPILE_S = (7.35, 0.704)
"""Compiling the graph (cold), loading it from the cache (warm)."""
HEAD_COMPILE_S = (8.61, 1.2)
"""EAGLE-3's `eagle_head` compile, cold and warm."""
SAVE_S = 1.66
"""Saving the AOT-compiled function after a cold compile."""
SILENT_S = 15.0
"""The silent seconds between `Graph capturing finished` and `init engine ... took` (12-19 s on the H100)."""
ASLEEP_GIB = 1.27
"""What a GPU still holds while the server sleeps (`Sleep mode freed ..., 1.27 GiB memory is still in use`)."""
SLEEP_S = 1.240656
"""`It took 1.240656 seconds to fall asleep.`"""
WAKE_S = 0.085806
"""`It took 0.085806 seconds to wake up tags {'weights', 'kv_cache'}.`"""


class VllmLogWriter(LogWriter):
    """Writes vLLM lines: `(PROC pid=N) LEVEL MM-DD HH:MM:SS [source] message`."""

    batch_lines = False

    def __init__(self, tp_size: int, proc: str = "APIServer", pid: int | None = None) -> None:
        super().__init__(False, tp_size)
        self.proc = proc
        self.pid = os.getpid() if pid is None else pid

    def tag(self, proc: str | None = None, pid: int | None = None) -> str:
        """`(APIServer pid=N) `."""
        return f"({proc or self.proc} pid={self.pid if pid is None else pid}) "

    def vlog(
        self, source: str, message: str, level: str = "INFO", proc: str | None = None, pid: int | None = None
    ) -> None:
        """One vLLM logger line."""
        stamp = time.strftime("%m-%d %H:%M:%S")
        self._write(self._err, f"{self.tag(proc, pid)}{level} {stamp} [{source}] {message}\n")

    def log(self, message: str, rank: int | None = None) -> None:
        """A line of the simulator's own (shared code) in vLLM's format."""
        self.vlog("api_server.py:1", message)

    def lines(self, first: str, rest: list[str], rank: int | None = None) -> None:
        """A first line and unprefixed continuation lines, in one write."""
        body = "".join(f"{line}\n" for line in rest)
        stamp = time.strftime("%m-%d %H:%M:%S")
        self._write(self._err, f"{self.tag()}ERROR {stamp} [core.py:1] {first}\n{body}")

    def uvicorn(self, level: str, message: str) -> None:
        """uvicorn's own line behind vLLM's process tag: `(APIServer pid=N) INFO:     message`."""
        self._write(self._err, f"{self.tag()}{(level + ':').ljust(10)}{message}\n")

    def access(self, peer: str, method: str, path: str, status: int) -> None:
        """uvicorn's access line."""
        phrase = HTTPStatus(status).phrase
        self._write(self._out, f'{self.tag()}INFO:     {peer} - "{method} {path} HTTP/1.1" {status} {phrase}\n')


def tqdm_bar(desc: str, n: int, total: int, elapsed: float) -> str:
    """tqdm's default bar: `DESC:  PP%|███▌      | n/N [elapsed<remaining, rate]`."""
    frac = n / total if total else 1.0
    filled = frac * 10
    full = int(filled)
    bar = "█" * full
    if full < 10:
        bar += TQDM_BLOCKS[int((filled - full) * 8)] + " " * (9 - full)
    return f"{desc}: {frac * 100:3.0f}%|{bar}| {n}/{total} {tqdm_tail(n, total, elapsed)}"


def compile_dir(config: SimConfig) -> str:
    """The `torch_compile_cache/<hash>` directory vLLM names in `Using cache directory`."""
    key = hashlib.sha256(str(compile_cache_entry(config)).encode()).hexdigest()[:10]
    return f"{compile_cache_entry(config).parent}/torch_compile_cache/{key}"


def draft_of(config: SimConfig) -> bool:
    """A draft model loads (EAGLE/EAGLE-3); n-gram has none."""
    return config.speculative_algorithm in ("EAGLE", "EAGLE3")


def total_vllm_seconds(config: SimConfig, cached: bool) -> float:
    """Unscaled compile seconds of a vLLM start (what a warm cache saves; used by tests)."""
    i = 1 if cached else 0
    t = DYNAMO_S[i] + COMPILE_S[i] + (0.0 if cached else SAVE_S)
    return t + (HEAD_COMPILE_S[i] if draft_of(config) else 0.0)


class VllmRankScript(RankScript):
    """One rank's vLLM startup; only the node's first rank prints (as the EngineCore)."""

    def __init__(self, config: SimConfig, rank: int, t0: float, log: VllmLogWriter) -> None:
        super().__init__(config, rank, t0, log)
        self.v = log
        self.compile_cached = self.compile_entry.exists()
        self.printer = rank == config.first_rank

    def line(self, source: str, message: str, level: str = "INFO") -> None:
        """An EngineCore line at the cursor (first rank only)."""
        if self.printer:
            self.clock.until(self.t)
            self.v.vlog(source, message, level, proc="EngineCore")

    def raw_line(self, text: str) -> None:
        """Text behind the EngineCore tag only (bars), at the cursor."""
        if self.printer:
            self.v.raw(f"{self.v.tag('EngineCore')}{text}")

    def run(self) -> None:
        """The whole vLLM startup of this rank."""
        c, p = self.c, self.p
        algo = c.speculative_algorithm
        v2 = algo != "NGRAM"  # vLLM 0.24: model runner V2, except for n-gram (V1)
        self.report(0.0)
        self.advance(self.jit(p.pre_s))
        spec = "None"
        if algo is not None:
            method = {"NGRAM": "ngram", "EAGLE3": "eagle3", "EAGLE": "eagle"}.get(algo, algo.lower())
            model = "None" if c.speculative_draft_model_path is None else repr(c.speculative_draft_model_path)
            spec = f"SpeculativeConfig(method={method!r}, model={model}, num_spec_tokens={c.speculative_num_steps})"
        self.line(
            "core.py:114",
            f"Initializing a V1 LLM engine (v{VERSION}) with config: model={c.model_path!r}, "
            f"speculative_config={spec}, tokenizer={c.tokenizer_path!r}, skip_tokenizer_init=False",
        )
        self.hang_check("dist-init")
        self.advance(0.5)
        self.line(
            "parallel_state.py:1588",
            f"world_size={c.tp_size} rank=0 local_rank=0 distributed_init_method=tcp://127.0.0.1:{c.port + 7} "
            "backend=nccl",
        )
        self.advance(self.jit(p.dist_s))
        self.avail -= 0.5
        self.report(1.0)
        self.line(
            "parallel_state.py:1923",
            f"rank 0 in world size {c.tp_size} is assigned as DP rank 0, PP rank 0, PCP rank 0, TP rank 0, "
            "EP rank N/A, EPLB rank N/A",
        )
        if v2:
            self.line("gpu_worker.py:331", "Using V2 Model Runner")
            self.line("model_runner.py:281", "Loading model from scratch...")
        else:
            self.line("gpu_model_runner.py:5160", f"Starting to load model {c.model_path}...")
        self.hang_check("weights")
        took = self.load(p.weight_gb, self.jit(p.weights_s), p.shards)
        if algo == "NGRAM":
            self.line("gpu_model_runner.py:5184", "Loading drafter model...")  # and no weights: n-gram has none
            self.advance(0.3)
            self.line(
                "gpu_model_runner.py:5255", f"Model loading took {p.weight_gb:.2f} GiB memory and {took:.6f} seconds"
            )
        elif draft_of(c):
            self.line("eagle3_utils.py:31", "Using Eagle3 auxiliary layers from model: (2, 8, 13)")
            self.hang_check("draft-weights")
            took += self.load(p.draft_gb, self.jit(p.draft_weights_s), 1)
            self.line(
                "model_runner.py:302", f"Model loading took {p.weight_gb + p.draft_gb:.2f} GiB and {took:.6f} seconds"
            )
        else:
            self.line("model_runner.py:302", f"Model loading took {p.weight_gb:.2f} GiB and {took:.6f} seconds")
        compiled = self.compile("backbone", DYNAMO_S, COMPILE_S)
        if draft_of(c):
            compiled += self.compile("eagle_head", (0.69, 0.4), (HEAD_COMPILE_S[0] - 0.69, HEAD_COMPILE_S[1] - 0.4))
        if self.rank == c.first_rank:
            self.compile_entry.parent.mkdir(parents=True, exist_ok=True)
            self.compile_entry.touch()
        self.hang_check("kv-cache")
        self.advance(self.jit(p.kv_s) + 2.0)
        self.avail -= p.kv_gb
        self.report(2.0)
        context = c.context_length or p.context_len
        self.line("gpu_worker.py:508", f"Available KV cache memory: {p.kv_gb:.2f} GiB")
        self.line("kv_cache_utils.py:2146", f"GPU KV cache size: {p.kv_tokens:,} tokens")
        self.line(
            "kv_cache_utils.py:2147",
            f"Maximum concurrency for {context:,} tokens per request: {p.kv_tokens / context:.2f}x",
        )
        self.hang_check("cuda-graph")
        sizes = capture_batch_sizes(c.cuda_graph_max_bs)
        per_bs = (p.verify_graph_per_bs_s if algo else p.graph_per_bs_s) / 2
        start = self.t
        self.capture_bar("Capturing CUDA graphs (PIECEWISE)", len(sizes), per_bs, 0.2)
        self.capture_bar("Capturing CUDA graphs (FULL)", len(sizes), per_bs, 0.2)
        if draft_of(c):
            self.advance(0.05)
            self.line("speculator.py:100", "Capturing model for speculator...")
            self.hang_check("draft-graph")
            for desc in ("prefill CUDA graphs (PIECEWISE)", "prefill CUDA graphs (FULL)", "decode CUDA graphs (FULL)"):
                self.capture_bar(f"Capturing {desc}", len(sizes), p.draft_graph_per_bs_s / 4, 0.1)
        graphs_gb = 0.4 + (0.3 if draft_of(c) else 0.0)
        source = "model_runner.py:726" if v2 else "gpu_model_runner.py:6656"
        secs = max(1, round((self.t - start) / max(c.time_scale, 1e-9))) if c.time_scale else 1
        self.line(source, f"Graph capturing finished in {secs} secs, took {graphs_gb:.2f} GiB")
        self.report(4.0)
        self.hang_check("warmup")
        self.advance(self.jit(SILENT_S))  # the silent seconds: kernel warm-up, nothing printed
        self.line(
            "jit_monitor.py:60",
            "Kernel JIT monitor activated — Triton JIT compilations during inference will be logged as warnings.",
        )
        self.advance(0.5)
        total = self.t / c.time_scale if c.time_scale else self.t
        self.line(
            "core.py:337",
            f"init engine (profile, create kv cache, warmup model) took {total:.2f} s (compilation: {compiled:.2f} s)",
        )
        self.report(0.0, serving=True)

    def load(self, gb: float, seconds: float, shards: int) -> float:
        """`Filesystem type ...`, the shard bar (one prefixed line per redraw) and `Loading weights took`."""
        self.line(
            "weight_utils.py:849",
            f"Filesystem type for checkpoints: EXT4. Checkpoint size: {gb:.2f} GiB. Available RAM: 123.61 GiB.",
        )
        start = self.t
        real = self.advance(seconds)
        for n in range(shards + 1):
            self.clock.until(start + real * n / shards)
            self.report(6.0 + 8.0 * (n % 2), gb * n / shards)
            self.raw_line("\r" + shard_bar(n, shards, seconds * n / shards) + "\n")
        self.raw_line("\n")
        self.avail -= gb
        self.line("default_loader.py:430", f"Loading weights took {seconds:.2f} seconds")
        return seconds + 0.3

    def compile(self, part: str, dynamo: tuple[float, float], compile_s: tuple[float, float]) -> float:
        """One torch.compile of `part` (backbone, eagle_head): cold, or from the cache."""
        i = 1 if self.compile_cached else 0
        self.advance(2.0)
        where = compile_dir(self.c)
        self.line("backends.py:1089", f"Using cache directory: {where}/rank_0_0/{part} for vLLM's torch.compile")
        self.hang_check("compile")
        self.report(60.0)
        self.advance(self.jit(dynamo[i]))
        self.line("backends.py:1148", f"Dynamo bytecode transform time: {dynamo[i]:.2f} s")
        aot = f"{where}/torch_aot_compile/{hashlib.sha256(part.encode()).hexdigest()}/rank_0_0/model"
        if self.compile_cached:
            self.advance(self.jit(compile_s[1]))
            self.line(
                "backends.py:292",
                "Directly load the compiled graph(s) for compile range (1, 8192) from the cache, "
                f"took {compile_s[1]:.3f} s",
            )
            self.line("decorators.py:311", f"Directly load AOT compilation from path {aot}")
            total = dynamo[1] + compile_s[1] + 0.18
        else:
            self.line("backends.py:378", "Cache the graph of compile range (1, 8192) for later use")
            self.advance(self.jit(compile_s[0]))
            self.line("backends.py:393", f"Compiling a graph for compile range (1, 8192) takes {compile_s[0]:.2f} s")
            self.advance(SAVE_S if part == "backbone" else 0.05)
            self.line("decorators.py:708", f"saved AOT compiled function to {aot}")
            total = dynamo[0] + compile_s[0] + (SAVE_S if part == "backbone" else 0.05)
        self.line("monitor.py:53", f"torch.compile took {total:.2f} s in total")
        self.advance(0.2)
        self.line("monitor.py:81", "Initial profiling/warmup run took 0.20 s")
        return total

    def capture_bar(self, desc: str, total: int, per_bs: float, gb: float) -> None:
        """One tqdm capture bar, redrawn with `\\r` on one prefixed line."""
        start = self.t
        planned = per_bs * total * self.plan.uniform(0.9, 1.1)
        real = max(planned * self.c.time_scale, MIN_PHASE)
        self.t += real
        self.report(93.0)
        steps = min(total, 8)
        self.raw_line("")  # the tag once: the redraws follow it on the same line, as tqdm's `\r` does
        for k in range(steps + 1):
            n = total * k // steps
            self.clock.until(start + real * k / steps)
            if self.printer:
                self.v.raw("\r" + tqdm_bar(desc, n, total, planned * k / steps))
        if self.printer:
            self.v.raw("\n")
        self.avail -= gb


ROUTES = (
    ("/openapi.json", "GET, HEAD"),
    ("/health", "GET"),
    ("/metrics", "GET"),
    ("/v1/models", "GET"),
    ("/server_info", "GET"),
    ("/v1/chat/completions", "POST"),
    ("/v1/completions", "POST"),
)
SLEEP_ROUTES = (("/sleep", "POST"), ("/wake_up", "POST"), ("/is_sleeping", "GET"))


def api_server_lines(log: VllmLogWriter, config: SimConfig) -> None:
    """The API server's first lines: the banner, `non-default args`, the model and scheduler config."""
    for art in ("", "       █     █     █▄   ▄█", f" ▄▄ ▄█ █     █     █ ▀▄▀ █  version {VERSION}"):
        log.vlog("api_utils.py:339", art)
    log.vlog("api_utils.py:339", f"  █▄█▀ █     █     █     █  model   {config.model_path}")
    log.vlog("api_utils.py:339", "   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀")
    log.vlog("api_utils.py:339", "")
    args: dict[str, object] = {"host": config.host, "model": config.model_path}
    if config.context_length:
        args["max_model_len"] = config.context_length
    if config.served_model_name != config.model_path:
        args["served_model_name"] = [config.served_model_name]
    if config.sleep_mode:
        args["enable_sleep_mode"] = True
    if config.speculative_algorithm:
        spec: dict[str, object] = {"method": config.speculative_algorithm.lower()}
        if config.speculative_draft_model_path:
            spec["model"] = config.speculative_draft_model_path
        spec["num_speculative_tokens"] = config.speculative_num_steps
        args["speculative_config"] = spec
    log.vlog("api_utils.py:273", f"non-default args: {args}")
    if config.unknown_flags:
        log.vlog(
            "api_utils.py:273", f"specdash sim: ignoring flags it does not simulate: {' '.join(config.unknown_flags)}"
        )
    if config.sleep_mode:
        log.vlog("model.py:524", "Enabling cumem allocator because sleep mode requires it.")
    log.vlog("model.py:598", "Resolved architecture: LlamaForCausalLM")
    log.vlog("model.py:1725", f"Using max model len {config.context_length or 131072}")
    log.vlog("scheduler.py:252", "Chunked prefill is enabled with max_num_batched_tokens=8192.")
    if config.speculative_algorithm == "NGRAM":
        log.vlog(
            "vllm.py:981",
            "Async scheduling not supported with ngram-based speculative decoding and will be disabled.",
            "WARNING",
        )
        log.vlog("vllm.py:1006", "Asynchronous scheduling is disabled.")
    else:
        log.vlog("vllm.py:1006", "Asynchronous scheduling is enabled.")


def routes_lines(log: VllmLogWriter, config: SimConfig) -> None:
    """What the API server prints once the engine is up, before uvicorn starts."""
    log.vlog("api_server.py:577", "Supported tasks: ['generate']")
    if config.sleep_endpoints:
        log.vlog(
            "__init__.py:36",
            "SECURITY WARNING: Development endpoints are enabled! This should NOT be used in production!",
            "WARNING",
        )
    log.vlog("api_server.py:581", f"Starting vLLM server on http://{config.host}:{config.port}")
    log.vlog("launcher.py:37", "Available routes are:")
    for path, methods in ROUTES + (SLEEP_ROUTES if config.sleep_endpoints else ()):
        log.vlog("launcher.py:46", f"Route: {path}, Methods: {methods}")


def shutdown_lines(log: VllmLogWriter, engine_pid: int, uvicorn: bool) -> None:
    """vLLM's `[shutdown]` lines on SIGTERM (the API server's and the engine's)."""
    log.vlog("launcher.py:100", "[shutdown] API server: shutdown triggered")
    log.vlog(
        "core.py:1214", "[shutdown] EngineCore: trigger received signal=SIGTERM", proc="EngineCore", pid=engine_pid
    )
    log.vlog("launcher.py:116", "[shutdown] API server: stopping engine client mode=abort timeout=0s")
    log.vlog("core.py:1227", "[shutdown] EngineCore: exiting busy loop", proc="EngineCore", pid=engine_pid)
    log.vlog("core_client.py:662", "[shutdown] MPClient: complete")
    log.vlog("launcher.py:149", "[shutdown] API server: shutting down FastAPI HTTP server")
    if uvicorn:
        log.uvicorn("INFO", "Shutting down")
        log.uvicorn("INFO", "Waiting for application shutdown.")
        log.uvicorn("INFO", "Application shutdown complete.")
