"""The vocabulary shared by the engines' log rules: a cleaned line, what a line means, and the rule interface.

An engine module turns one raw log line into a `LogLine` (prefixes and colour stripped, rank tag and
timestamp pulled out) and then into zero or more observations: a phase hint, a progress value, a crash
signal, a metric record or a version hint. The observations are facts about *one line*; deciding what
they mean together (never going backwards, when a traceback is a crash) is `core.startup`'s job.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from dataclasses import dataclass

from specdash.core.models import STARTUP_ORDER, Phase, Progress
from specdash.engines.metrics import BatchStats, EngineStats, ServerLimits, SpecDecodeStats
from specdash.engines.text import TRACEBACK, exception_line, trim_traceback


@dataclass(frozen=True, slots=True)
class LogLine:
    """One log line after cleaning."""

    raw: str
    """The line without ANSI codes and container prefix, but with the engine's own prefix (for excerpts)."""
    text: str
    """The message after the engine prefix (SGLang `[ts TPn] `, vLLM `(Proc pid=N) LEVEL ts [file:line] `)."""
    rank: str = ""
    """Who printed it: `TP0`, `DP0 TP0`, `EngineCore_DP0`, `Worker_TP1`; empty when the line has no tag."""
    time: float | None = None
    """The log's own timestamp in seconds (see `engines.text.parse_*_time` for the epoch), if it had one."""
    level: str = ""
    """`INFO`, `WARNING`, `ERROR`, ... when the prefix carried a level (vLLM); empty otherwise."""


@dataclass(frozen=True, slots=True)
class PhaseHint:
    """The line shows the server is in (at least) this phase."""

    phase: Phase
    """The phase the line belongs to."""


@dataclass(frozen=True, slots=True)
class ProgressHint:
    """The line reports progress inside a phase (shards loaded, graph batch sizes captured)."""

    phase: Phase
    """The phase the progress belongs to."""
    progress: Progress
    """Units done of units total."""


class CrashKind(enum.Enum):
    """How strongly a line says the server is failing."""

    TRACEBACK = "traceback"
    """`Traceback (most recent call last):` starts: only a suspicion (warnings print tracebacks too)."""
    EXCEPTION = "exception"
    """`SomeError: message` at the end of a traceback: the best crash reason, but not proof of a crash alone."""
    MARKER = "marker"
    """A line only printed when the server is dying (`Scheduler hit an exception`, `EngineCore failed to
    start.`); the crash is declared once its exception line arrives, the process exits, or a grace passes."""
    FATAL = "fatal"
    """A dying line that carries its own reason (`[Errno 98] ... address already in use`); declared at once."""


@dataclass(frozen=True, slots=True)
class CrashSignal:
    """The line is (part of) a failure report."""

    kind: CrashKind
    """How strong the signal is."""
    text: str
    """The reason to show: the message, trimmed of a trailing `Traceback (most recent call last):`."""
    weight: int = 0
    """Among several markers, the most specific (highest weight) names the crash."""


@dataclass(frozen=True, slots=True)
class SuspectHint:
    """Something looks wrong but is not a crash by itself (e.g. a negative profiled KV size)."""

    text: str
    """What looked wrong."""


@dataclass(frozen=True, slots=True)
class VersionHint:
    """What the line tells about the engine's version: exact (`0.23.0`) or a range (`<0.5.5`)."""

    version: str
    """The version or version range."""
    exact: bool = False
    """True when the line named the version itself (a banner), False for a range inferred from wording."""


Metrics = BatchStats | EngineStats | SpecDecodeStats | ServerLimits
"""The server's own view of its load, parsed from its periodic log lines."""

Observation = PhaseHint | ProgressHint | CrashSignal | SuspectHint | VersionHint | Metrics
"""Everything one line can mean."""


def crash_signals(text: str, markers: tuple[tuple[str, CrashKind, int], ...]) -> list[Observation]:
    """Traceback start, exception line and the first matching marker of one message."""
    out: list[Observation] = []
    if TRACEBACK in text:
        out.append(CrashSignal(CrashKind.TRACEBACK, text))
    if exception_line(text):
        out.append(CrashSignal(CrashKind.EXCEPTION, text.strip()))
    for needle, kind, weight in markers:
        if needle in text:
            out.append(CrashSignal(kind, trim_traceback(text), weight))
            break
    return out


class HealthState(enum.StrEnum):
    """What one health probe answer means for an engine."""

    LOADING = "loading"
    """Connection refused: no HTTP listener yet (weights, KV, graphs)."""
    WARMING_UP = "warming up"
    """SGLang 503 before ready: uvicorn serves, warmup is running."""
    READY = "ready"
    """200."""
    UNHEALTHY = "unhealthy"
    """SGLang 503 after ready: draining after SIGTERM, or a failed health generation."""
    DEAD = "dead"
    """vLLM 503: `EngineDeadError`."""
    UNKNOWN = "unknown"
    """Any other status: not a statement about the server's phase."""


class EngineRules(ABC):
    """One engine's log rules. Instances keep a little per-stream state, so use one per log stream."""

    name: str = ""
    """`sglang` or `vllm`."""
    startup_order: tuple[Phase, ...] = STARTUP_ORDER
    """The order this engine passes through the startup phases; the tracker never moves backwards along it."""

    @abstractmethod
    def clean(self, raw: str) -> LogLine:
        """Strip colour and container prefixes and split off the engine's own prefix."""

    @abstractmethod
    def observe(self, line: LogLine) -> list[Observation]:
        """What a cleaned line means; an empty list for most lines."""

    @staticmethod
    @abstractmethod
    def health_state(status: int | None, *, ready: bool) -> HealthState:
        """What a `/health` answer means. `status` None is a refused connection; `ready` says whether the
        server has been seen ready before."""
