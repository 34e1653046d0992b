"""The observation vocabulary of the log rules: a cleaned line, and everything one line can mean.

Shared by the engine modules, the engine-agnostic evidence (`engines.evidence`) and the startup tracker
(`core.startup`), which decides what the observations mean together.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from specdash.engines.metrics import BatchStats, EngineStats, ServerLimits, SpecDecodeStats
from specdash.phases import Phase, Progress


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
    """`INFO`, `WARNING`, `ERROR`, ... when the prefix carried a level (vLLM, uvicorn); empty otherwise."""
    tag: str = ""
    """The process tag around the line (`EngineCore_DP0`, Ray's `SGLangEngine`), without `pid=`."""


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
    FRAME = "frame"
    """A traceback frame (`File "x.py", line 3, in f`): a traceback is being printed, header or not."""


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


@dataclass(frozen=True, slots=True)
class ServingHint:
    """The line shows the server working on requests (batch lines, stats lines, an inference access line)."""

    alive: bool = True
    """False when the line shows a request failing on the server's side (HTTP 5xx, `failed (engine dead)`):
    it proves the server was serving, not that it still is."""


@dataclass(frozen=True, slots=True)
class StopHint:
    """The line shows an intentional shutdown (a SIGTERM/SIGINT received, `Shutting down`, ...)."""

    signal: str = ""
    """`SIGTERM` or `SIGINT` when the line names the signal; empty for teardown wording alone."""


Metrics = BatchStats | EngineStats | SpecDecodeStats | ServerLimits
"""The server's own view of its load, parsed from its periodic log lines."""

Observation = PhaseHint | ProgressHint | CrashSignal | SuspectHint | VersionHint | ServingHint | StopHint | Metrics
"""Everything one line can mean."""


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
