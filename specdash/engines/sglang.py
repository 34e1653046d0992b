"""SGLang's log rules (v0.2 to the 2026 HEAD) and health semantics; reference: engines.md 2.1-2.2, 5.1-5.4, 6.1.

Phases, in SGLang's order: dist-init (`Init torch distributed begin`), weights (`Load weight begin`, shard bar
n/N), KV pool (`Load weight end` on rank 0, `KV Cache is allocated`, `Memory pool end`), target graphs
(`Capture cuda graph begin`, `Capturing batches (bs=N ...)` i/M, 2026 `Capture target decode CUDA graph
begin ... bs=[...]`), then with speculative decoding the draft model (the *second* `Load weight begin` of a
rank, or a `Load weight end. type=...Eagle...`) and its graphs (`Capture draft [extend|decode] ... graph`),
then warmup (`Application startup complete.`: uvicorn serves but warmup still runs) and ready
(`The server is fired up and ready to roll!`).
"""

from __future__ import annotations

import re
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
    SuspectHint,
    VersionHint,
    crash_signals,
    owned_by,
)
from specdash.engines.metrics import BatchStats, ServerLimits, to_float, to_fraction, to_int
from specdash.engines.residency import HttpCall, Residency
from specdash.engines.text import bar_counts, epoch_seconds
from specdash.phases import Phase, Progress

# `[2025-10-31 02:15:42 TP1] `, `[04:40:55 TP0] `, `[2025-07-02 07:41:58.123 DP0 TP0 EP0] ` (engines.md 5.8).
_PREFIX = re.compile(r"\[(?:(\d{4})-(\d\d)-(\d\d) )?(\d\d):(\d\d):(\d\d)(?:\.(\d+))?((?: [A-Z][A-Z_]*\d+)*)\] ?")
_GPU_ID = re.compile(r"\[gpu_id=(\d+)\] ?")  # v0.2.x puts the rank inside the message
_BATCH = re.compile(r"(Prefill|Decode) batch(?: \[(\d+)\])?([.,])(?: \[(\d+)\])?")
_CAPTURE = re.compile(r"Capture (.*?)\s*cuda graph (begin|end|failed)", re.IGNORECASE)
_BS_LIST = re.compile(r"\bbs=\[([^\]]*)\]")
_DRAFT_TYPE = re.compile(r"type=\w*(?:Eagle|EAGLE|MTP|NextN|Draft|Medusa)")
_KEY_VALUE = re.compile(r"(\w+)=(-?[\d.]+)")
_FIELD = re.compile(r"\s*([^,:]+?):\s*([^,\s]*)")

# (substring, kind, weight): lines only printed when the server is dying (engines.md 6.1).
_MARKERS: tuple[tuple[str, CrashKind, int], ...] = (
    ("Scheduler hit an exception", CrashKind.MARKER, 3),
    ("scheduler is dead", CrashKind.MARKER, 2),
    ("Initialization failed", CrashKind.MARKER, 2),
    ("crashed with exit code", CrashKind.MARKER, 2),
    ("Received sigquit", CrashKind.MARKER, 1),
    ("SIGQUIT received", CrashKind.MARKER, 1),
    ("scheduler died during initialization", CrashKind.FATAL, 4),
    ("Capture cuda graph failed", CrashKind.FATAL, 4),
    ("Capture CUDA graph failed", CrashKind.FATAL, 4),
    ("Not enough memory", CrashKind.FATAL, 4),
    ("ddress already in use", CrashKind.FATAL, 4),
)


def _int(value: str | None) -> int | None:
    return None if value is None else to_int(value)


def _real(value: str | None) -> float | None:
    return None if value is None else to_float(value.rstrip("%"))


def is_rank0(rank: str) -> bool:
    """True for an untagged line or one whose every index is 0 (`TP0`, `DP0 TP0 EP0`)."""
    return not any(ch.isdigit() and ch != "0" for ch in rank)


class SGLangRules(EngineRules):
    """SGLang: what it is, and its log rules; one instance per log stream (it counts each rank's weight loads)."""

    name = "sglang"
    launch_module = "sglang.launch_server"
    model_flag = "--model-path"
    multinode_flags = ("--nnodes", "{nnodes}", "--node-rank", "{rank}", "--dist-init-addr", "{head}:{port}")
    launch_env: ClassVar[Mapping[str, str]] = {}
    ready_lines = ("The server is fired up and ready to roll!",)
    residency = Residency(
        flags=("--enable-memory-saver", "--enable-weights-cpu-backup"),
        draft_flags=("--enable-draft-weights-cpu-backup",),
        sleep=HttpCall("POST", "/release_memory_occupation", {}),  # no tags: weights, KV cache and graphs
        wake=HttpCall("POST", "/resume_memory_occupation", {}),
        is_sleeping=None,
        spec_markers=("--speculative-algorithm",),
        draft_markers=("--speculative-draft-model-path", "--speculative-draft-model"),
    )
    votes = (
        " TP0]",
        " TP1]",
        "Load weight begin",
        "Load weight end",
        "Decode batch",
        "Prefill batch",
        "Capturing batches (bs=",
        "cuda graph:",
        "Capture cuda graph",
        "fired up and ready to roll",
        "Scheduler hit an exception",
        "server_args=ServerArgs",
        "sglang",
        "max_total_num_tokens=",
        "Memory pool end",
    )

    prefix_shape = re.compile(r"\[(?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d(?:\.\d+)?(?: [A-Z][A-Z_]*\d+)+\] ")

    @classmethod
    def identify(cls, server_info: Mapping[str, Any] | None, models: Mapping[str, Any] | None) -> bool:
        """`/server_info` has `internal_states` (sglang#6201), or `/v1/models` says `owned_by: sglang`."""
        return bool(server_info and "internal_states" in server_info) or owned_by(models) == cls.name

    def __init__(self) -> None:
        self._loads: dict[str, int] = {}
        self._draft_load = False
        self._draft_graph = False
        self._graph_total: dict[Phase, int] = {}
        self._versions: set[str] = set()
        self._batch_version = False
        self._ts_key = ""
        self._ts_value: float | None = None

    # -- cleaning ---------------------------------------------------------------------------------------

    def split_prefix(self, text: str, tag: str) -> LogLine:
        """Split `[ts TPn] ` off the message."""
        line = text
        if not line.startswith("["):
            return LogLine(raw=line, text=line, rank=tag, tag=tag)
        m = _PREFIX.match(line)
        if m is None:
            return LogLine(raw=line, text=line, rank=tag, tag=tag)
        text = line[m.end() :]
        rank = m.group(8).strip()
        if not rank and text.startswith("[gpu_id="):
            g = _GPU_ID.match(text)
            if g is not None:
                rank, text = f"GPU{g.group(1)}", text[g.end() :]
        key = line[1 : m.start(8)]
        # Many consecutive lines share one timestamp; converting it once per distinct value is cheaper.
        if key != self._ts_key:
            self._ts_key = key
            year, month, day = (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m.group(1) else (1970, 1, 1)
            self._ts_value = epoch_seconds(
                year, month, day, int(m.group(4)), int(m.group(5)), int(m.group(6)), m.group(7) or ""
            )
        return LogLine(raw=line, text=text, rank=rank or tag, time=self._ts_value, tag=tag)

    # -- meaning ----------------------------------------------------------------------------------------

    def observe_line(self, line: LogLine) -> list[Observation]:
        """What one cleaned SGLang line means."""
        t = line.text
        if len(t) < 7:
            return []
        if " batch" in t:
            if "Decode batch" in t or "Prefill batch" in t:
                return self._batch(t)
            if "Capturing batches" in t:
                return self._capture_bar(t)
        if "shards" in t and "%" in t:
            counts = bar_counts(t)
            if counts is not None:
                phase = Phase.LOADING_DRAFT if self._draft_load else Phase.LOADING_WEIGHTS
                return [ProgressHint(phase, Progress(counts[0], counts[1], "shards"))]
        out = crash_signals(t, _MARKERS)
        if "Load weight " in t:
            out += self._load_weight(t, line.rank)
        elif "Captur" in t:
            out += self._capture(t)
        elif "Init torch distributed" in t or "Init nccl" in t:
            out.append(PhaseHint(Phase.DIST_INIT))
        elif "KV Cache is allocated" in t or "Memory pool end" in t or "Using KV cache dtype" in t:
            out.append(PhaseHint(Phase.LOADING_DRAFT if self._draft_load else Phase.ALLOCATING_KV))
        elif "DeepGEMM" in t and ("JIT" in t or "ompil" in t or "warmup" in t.lower()):
            # DeepGEMM's JIT between the KV pool and capture (`Entering DeepGEMM JIT Pre-Compile session`,
            # 10-20 min cold); --enable-torch-compile compiles inside capture, so its lines stay capture there.
            out.append(PhaseHint(Phase.COMPILING))
        elif "torch.compile" in t or "torch_compile" in t:
            out.append(PhaseHint(Phase.COMPILING))
        elif "profiled value -" in t:
            out += [PhaseHint(Phase.ALLOCATING_KV), SuspectHint(t.strip())]
        elif "max_total_num_tokens=" in t:
            out.append(self._limits(t))
        elif "Application startup complete" in t or "Uvicorn running on" in t:
            out.append(PhaseHint(Phase.WARMING_UP))
        elif any(ready in t for ready in self.ready_lines):
            out.append(PhaseHint(Phase.READY))
        elif "Health check failed" in t:
            out.append(SuspectHint(t.strip()))
        return out

    def _version(self, version: str) -> list[Observation]:
        if version in self._versions:
            return []
        self._versions.add(version)
        return [VersionHint(version)]

    def _load_weight(self, t: str, rank: str) -> list[Observation]:
        out: list[Observation] = []
        if "Load weight begin" in t:
            count = self._loads[rank] = self._loads.get(rank, 0) + 1
            # The draft (EAGLE) worker loads in the same scheduler process after the target (engines.md 5.2).
            if count >= 2:
                self._draft_load = True
            out.append(PhaseHint(Phase.LOADING_DRAFT if self._draft_load else Phase.LOADING_WEIGHTS))
        elif "Load weight end" in t:
            if _DRAFT_TYPE.search(t):
                self._draft_load = True
            if self._draft_load:
                out.append(PhaseHint(Phase.LOADING_DRAFT))
            else:
                # Only rank 0's end moves on: rank 0 prints the shard bar, and other ranks may finish first.
                out.append(PhaseHint(Phase.ALLOCATING_KV if is_rank0(rank) else Phase.LOADING_WEIGHTS))
            if "Load weight end. elapsed=" in t:
                out += self._version(">=2026-01-26 (sglang#15426)")
        return out

    def _capture(self, t: str) -> list[Observation]:
        m = _CAPTURE.search(t)
        if m is None:
            if "Capturing num tokens" in t:  # piecewise graphs: a phase sign, but not our progress unit
                return [PhaseHint(Phase.CAPTURING_DRAFT_GRAPHS if self._draft_graph else Phase.CAPTURING_GRAPHS)]
            return []
        name, what = m.group(1).lower(), m.group(2).lower()
        if what == "failed":
            return []
        if "draft" in name:
            self._draft_graph = True
        phase = Phase.CAPTURING_DRAFT_GRAPHS if "draft" in name else Phase.CAPTURING_GRAPHS
        out: list[Observation] = [PhaseHint(phase)]
        if "CUDA graph" in t and (name.startswith("target") or name in ("draft decode", "draft extend")):
            out += self._version(">=2026-06-22 (sglang#28937)")
        if what == "begin" and "prefill" not in name and "piecewise" not in name:
            bs = _BS_LIST.search(t)
            if bs is not None:
                total = len([x for x in bs.group(1).split(",") if x.strip()])
                if total:
                    self._graph_total[phase] = total
                    out.append(ProgressHint(phase, Progress(0, total, "batch sizes")))
        elif what == "end" and phase in self._graph_total and "prefill" not in name and "piecewise" not in name:
            total = self._graph_total[phase]
            out.append(ProgressHint(phase, Progress(total, total, "batch sizes")))
        return out

    def _capture_bar(self, t: str) -> list[Observation]:
        phase = Phase.CAPTURING_DRAFT_GRAPHS if self._draft_graph else Phase.CAPTURING_GRAPHS
        counts = bar_counts(t)
        if counts is None:
            return [PhaseHint(phase)]
        self._graph_total[phase] = counts[1]
        return [ProgressHint(phase, Progress(counts[0], counts[1], "batch sizes"))]

    def _batch(self, t: str) -> list[Observation]:
        m = _BATCH.search(t)
        if m is None:
            return []
        tail = t[m.end() :].rstrip()
        # One C-level pass for all `key: value` pairs: this is the hottest line type on a busy server.
        f = dict(_FIELD.findall(tail))
        out: list[Observation] = []
        if not self._batch_version:
            self._batch_version = True
            if m.group(3) == ".":
                out += self._version("<=0.5.4 (batch lines end in '.')")
            elif tail.endswith(","):
                out += self._version(">=0.5.5, before 2026-01-30 (trailing ', ')")
            else:
                out += self._version(">=2026-01-30 (sglang#17836)")
        iteration = m.group(2) or m.group(4)
        get = f.get
        graph = get("cuda graph") or get("npu graph") or get("cpu graph")
        hit_rate = get("cache hit rate")
        out.append(
            BatchStats(
                kind="decode" if m.group(1) == "Decode" else "prefill",
                running_reqs=_int(get("#running-req")),
                queue_reqs=_int(get("#queue-req")),
                tokens=_int(get("#token") or get("#full token")),
                token_usage=_real(get("token usage") or get("full token usage")),
                accept_len=_real(get("accept len")),
                accept_rate=_real(get("accept rate")),
                gen_throughput=_real(get("gen throughput (token/s)")),
                input_throughput=_real(get("input throughput (token/s)")),
                graph=None if graph is None else graph == "True",
                new_seqs=_int(get("#new-seq")),
                new_tokens=_int(get("#new-token")),
                cached_tokens=_int(get("#cached-token")),
                cache_hit_rate=None if hit_rate is None else to_fraction(hit_rate),
                pending_tokens=_int(get("#pending-token")),
                swa_tokens=_int(get("#swa token")),
                swa_token_usage=_real(get("swa token usage")),
                forward_iter=None if iteration is None else int(iteration),
            )
        )
        return out

    @staticmethod
    def _limits(t: str) -> ServerLimits:
        values = dict(_KEY_VALUE.findall(t))

        def num(key: str) -> int | None:
            return to_int(values[key]) if key in values else None

        return ServerLimits(
            max_total_tokens=num("max_total_num_tokens"),
            max_running_requests=num("max_running_requests"),
            context_len=num("context_len"),
            chunked_prefill_size=num("chunked_prefill_size"),
            max_prefill_tokens=num("max_prefill_tokens"),
        )

    # -- health -----------------------------------------------------------------------------------------

    @staticmethod
    def health_state(status: int | None, *, ready: bool) -> HealthState:
        """SGLang v0.5.1+: refused = loading, 503 = warming up (after ready: draining/unhealthy), 200 = ready.

        v0.4.x answers 200 as soon as uvicorn serves, before warmup; probe `/health_generate` there.
        """
        if status is None:
            return HealthState.LOADING
        if status == 200:
            return HealthState.READY
        if status == 503:
            return HealthState.UNHEALTHY if ready else HealthState.WARMING_UP
        return HealthState.UNKNOWN


RULES = SGLangRules
"""This module's engine (found by `engines.registry`)."""
