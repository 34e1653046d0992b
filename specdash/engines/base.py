"""The vocabulary shared by the engines: a cleaned line, what a line means, and the engine interface.

An engine is one module, `specdash/engines/<name>.py`, holding one `EngineRules` subclass: what the engine
*is* (its launch module, model flag, launch environment, ready lines, how to tell it from its HTTP
answers) and its log rules. The registry (`engines.registry`) finds the modules; nothing else lists engines.

The log rules turn one raw line into a `LogLine` (wrappers, colour and the engine's own prefix stripped,
process tag and timestamp pulled out) and then into zero or more observations: a phase hint, a progress
value, a crash signal, serving or shutdown evidence, a metric record or a version hint. Engine-specific
rules come first (exact wording, weights); the engine-agnostic evidence of `engines.evidence` fills in
beneath them (a kind of observation the engine rules gave for a line is not added again). Observations are
facts about *one line*; deciding what they mean together (never going backwards, when a traceback is a
crash, which of two conflicting signals wins) is `core.startup`'s job.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

from specdash.engines.evidence import generic_observations
from specdash.engines.observations import (
    CrashKind,
    CrashSignal,
    HealthState,
    LogLine,
    Metrics,
    Observation,
    PhaseHint,
    ProgressHint,
    ServingHint,
    StopHint,
    SuspectHint,
    VersionHint,
)
from specdash.engines.residency import Residency
from specdash.engines.text import trim_traceback, unwrap_tagged
from specdash.phases import STARTUP_ORDER, Phase

__all__ = [
    "CrashKind",
    "CrashSignal",
    "EngineRules",
    "HealthState",
    "LogLine",
    "Metrics",
    "Observation",
    "PhaseHint",
    "ProgressHint",
    "ServingHint",
    "StopHint",
    "SuspectHint",
    "VersionHint",
    "crash_signals",
    "owned_by",
]


def crash_signals(text: str, markers: tuple[tuple[str, CrashKind, int], ...]) -> list[Observation]:
    """The first of an engine's own crash markers `(substring, kind, weight)` in one message (tracebacks and
    exception lines are engine-agnostic: `engines.evidence`)."""
    for needle, kind, weight in markers:
        if needle in text:
            return [CrashSignal(kind, trim_traceback(text), weight)]
    return []


def owned_by(models: Mapping[str, Any] | None) -> str:
    """`owned_by` of the first model in a `/v1/models` answer (`sglang`, `vllm`), or empty."""
    data = models.get("data") if isinstance(models, Mapping) else None
    if isinstance(data, list) and data and isinstance(data[0], Mapping):
        return str(data[0].get("owned_by") or "")
    return ""


_STRUCTURE = (CrashKind.TRACEBACK, CrashKind.FRAME, CrashKind.EXCEPTION)

# A level word at the start of the message: uvicorn's `INFO:     `, Python logging's `ERROR:root:`.
_LEVEL_PREFIX = re.compile(r"(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)(?::\w*)?:\s+")


class EngineRules(ABC):
    """One engine: what it is (class attributes) and its log rules (instances keep a little per-stream state,
    so use one per log stream).

    A subclass sets the class attributes and implements `split_prefix`, `observe_line` and `health_state`.
    """

    name: ClassVar[str] = ""
    """The name in config files and on the command line (`sglang`, `vllm`)."""
    startup_order: ClassVar[tuple[Phase, ...]] = STARTUP_ORDER
    """The order this engine passes through the startup phases; the tracker never moves backwards along it."""
    launch_module: ClassVar[str] = ""
    """The module that starts the server: `python -m MODULE` (`sglang.launch_server`)."""
    model_flag: ClassVar[str] = "--model"
    """The launch flag that names the model (`--model-path` for SGLang)."""
    launch_env: ClassVar[Mapping[str, str]] = {}
    """Environment this engine needs at launch, beyond every engine's (`VLLM_HOST_IP` for vLLM)."""
    multinode_flags: ClassVar[tuple[str, ...]] = ()
    """Flags of one rank of a server over several nodes, with `{nnodes}`, `{rank}`, `{head}` (the head node's
    address) and `{port}` (its rendezvous port) filled in by the Slurm job (`server.slurm_job`)."""
    multinode_worker_flags: ClassVar[tuple[str, ...]] = ()
    """Extra flags of the ranks other than the head's (vLLM's `--headless`: no API server there)."""
    ready_lines: ClassVar[tuple[str, ...]] = ()
    """Substrings of the lines that say the server is ready."""
    votes: ClassVar[tuple[str, ...]] = ()
    """Substrings only this engine prints: each hit in a log is one vote for it (`registry.detect_engine`)."""
    prefix_shape: ClassVar[re.Pattern[str] | None] = None
    """The shape of this engine's own line prefix (after `unwrap`): each line of that shape is one vote."""
    residency: ClassVar[Residency | None] = None
    """How a server of this engine sleeps and wakes (`engines.residency`); None: it cannot stay resident."""

    @classmethod
    @abstractmethod
    def identify(cls, server_info: Mapping[str, Any] | None, models: Mapping[str, Any] | None) -> bool:
        """True when a server's `/server_info` or `/v1/models` answer (None when it had none) is this engine's."""

    def clean(self, raw: str) -> LogLine:
        """Strip wrappers and colour (`engines.text.unwrap`), then split off the engine's own prefix."""
        text, tag, tagged = unwrap_tagged(raw)
        line = self.split_prefix(text, tag)
        if tagged is not text:
            line = LogLine(tagged, line.text, line.rank, line.time, line.level, tag)
        body = line.text
        if not line.level and body[:1] in "DIWECF":
            m = _LEVEL_PREFIX.match(body)
            if m is not None:
                level = m.group(1)
                return LogLine(
                    line.raw, body[m.end() :], line.rank, line.time, "WARNING" if level == "WARN" else level, tag
                )
        return line

    def log_clock(self, epoch: float) -> float:
        """A wall-clock time (seconds since 1970) on this engine's log clock, whose naive timestamps are read as
        UTC: the same number here; vLLM's year-less clock overrides it."""
        return epoch

    @abstractmethod
    def split_prefix(self, text: str, tag: str) -> LogLine:
        """Split the engine's own prefix (timestamp, rank, level, source file) off an unwrapped line."""

    def observe(self, line: LogLine) -> list[Observation]:
        """What a cleaned line means: the engine's own rules, with the engine-agnostic evidence beneath them."""
        own = self.observe_line(line)
        generic = generic_observations(line)
        if not generic:
            return own
        kinds = {type(o) if not isinstance(o, CrashSignal) else o.kind for o in own}
        first: list[Observation] = []  # a traceback's structure comes before what the line says about it
        rest: list[Observation] = []
        for o in generic:
            if (o.kind if isinstance(o, CrashSignal) else type(o)) in kinds:
                continue
            (first if isinstance(o, CrashSignal) and o.kind in _STRUCTURE else rest).append(o)
        return first + own + rest

    @abstractmethod
    def observe_line(self, line: LogLine) -> list[Observation]:
        """What a cleaned line means to this engine's own rules; an empty list for most lines."""

    @staticmethod
    @abstractmethod
    def health_state(status: int | None, *, ready: bool) -> HealthState:
        """What a `/health` answer means. `status` None is a refused connection; `ready` says whether the
        server has been seen ready before."""
