"""The typed events `core.startup.StartupTracker` emits; the watcher turns them into UI messages.

`at` is always in the caller's clock: the `now` passed to `feed`/`health`/`tick`, or the log's own
timestamps when no `now` is given (replay).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from specdash.engines.observations import Metrics
from specdash.phases import CrashInfo, Phase, Progress


@dataclass(frozen=True, slots=True)
class PhaseChanged:
    """The server entered a later startup phase (never an earlier one)."""

    phase: Phase
    """The phase entered."""
    at: float
    """When."""
    line: str
    """The log line (or health answer) that showed it."""
    previous: Phase
    """The phase left."""


@dataclass(frozen=True, slots=True)
class ProgressChanged:
    """Progress inside a phase went up (it never goes down within a phase)."""

    phase: Phase
    """The phase the progress belongs to (always the current one)."""
    progress: Progress
    """Units done of total."""
    at: float
    """When."""


@dataclass(frozen=True, slots=True)
class Ready:
    """The server is ready to serve (after the matching `PhaseChanged(READY)`)."""

    at: float
    """When."""
    line: str
    """The ready marker or health answer."""


@dataclass(frozen=True, slots=True)
class Crashed:
    """The server failed; no more phase or progress events follow."""

    info: CrashInfo
    """The reason (the exception line when there was one) and an excerpt of the log before it."""
    at: float
    """When the crash was declared."""
    phase: Phase
    """The phase the server was in."""
    exit_code: int | None = None
    """The process's exit code, when the crash was declared from `process_exited`."""


@dataclass(frozen=True, slots=True)
class Exited:
    """The server process ended normally after it had been ready (exit code 0 or SIGTERM)."""

    code: int
    """The exit code."""
    at: float
    """When."""


@dataclass(frozen=True, slots=True)
class Suspect:
    """Something looks wrong but is not (yet) a crash: a traceback without a fatal marker, a warning."""

    reason: str
    """What looked wrong (the exception line for a traceback)."""
    at: float
    """When."""


@dataclass(frozen=True, slots=True)
class Stuck:
    """No phase change and no progress for longer than the phase's timeout. Emitted once per phase."""

    phase: Phase
    """The phase that stalled."""
    since: float
    """The last sign of life (phase entered or progress advanced)."""
    at: float
    """When it was noticed."""
    timeout: float
    """The timeout that was exceeded, seconds."""
    rule: str = ""
    """Which rule set the timeout (`core.stuck`), e.g. `3x the slowest of 5 recorded starts (41 s), floor 120 s`."""

    @property
    def reason(self) -> str:
        """A one-line explanation for the UI, with the rule that fired."""
        rule = f": {self.rule}" if self.rule else ""
        return f"no progress in {self.phase.value} for {self.at - self.since:.0f} s (limit {self.timeout:.0f} s{rule})"


@dataclass(frozen=True, slots=True)
class MetricsSeen:
    """A periodic metrics line or a startup capacity line (batch stats, engine stats, spec stats, limits)."""

    metrics: Metrics
    """The parsed record."""
    at: float
    """When."""
    rank: str = ""
    """Who printed it (SGLang `TP0`, vLLM `APIServer`); with TP > 1 only rank 0's lines describe the batch."""


@dataclass(frozen=True, slots=True)
class VersionSeen:
    """A log line told the engine's version (exact) or a version range."""

    version: str
    """`0.23.0`, or a range such as `<=0.5.4 (batch lines end in '.')`."""
    exact: bool
    """True when the log named the version."""
    at: float
    """When."""


@dataclass(frozen=True, slots=True)
class Serving:
    """The server, ready, is working on requests (the first serving line after ready); or, with `alive`
    False, requests failing after a crash prove it had been serving (so ready was reached)."""

    at: float
    """When."""
    line: str
    """The serving line (a batch line, a stats line, an inference access line)."""
    alive: bool = True
    """False when the line only proves the server had been serving (after a crash)."""


@dataclass(frozen=True, slots=True)
class Stopping:
    """The log shows an intentional shutdown; crash signals after it are the teardown, not a crash."""

    at: float
    """When."""
    line: str
    """The shutdown line."""
    signal: str = ""
    """`SIGTERM` or `SIGINT` when the line named it."""


StartupEvent = (
    PhaseChanged
    | ProgressChanged
    | Ready
    | Crashed
    | Exited
    | Suspect
    | Stuck
    | MetricsSeen
    | VersionSeen
    | Serving
    | Stopping
)
"""Everything the tracker emits."""


class Outcome(enum.StrEnum):
    """What the evidence so far says about a server."""

    READY = "ready"
    """It reached ready (a ready line or health answer, or serving lines proved it) and serves nothing yet."""
    SERVING = "serving"
    """Ready, and working on requests."""
    STOPPED = "stopped"
    """Shut down on purpose (a signal or teardown lines, or a normal exit after ready)."""
    CRASHED = "crashed"
    """It failed, before or after ready."""
    INCOMPLETE = "incomplete"
    """None of those yet (a startup in progress, or a log that stops in the middle of one)."""


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome the evidence supports, and the line that decided it (the latest decisive evidence wins)."""

    outcome: Outcome = Outcome.INCOMPLETE
    """The outcome."""
    line_no: int | None = None
    """The deciding line's number in the stream (1-based); None for a health answer or a process exit."""
    line: str = ""
    """The deciding line (cleaned), or a description of the health answer or exit that decided."""


class LineKind(enum.StrEnum):
    """What one log line is, for a log view's colours and filters (`ClassifiedLine.kind`)."""

    NORMAL = "normal"
    PROGRESS = "progress"
    """A progress-bar redraw (`ClassifiedLine.bar` says which bar)."""
    SERVING = "serving"
    """Batch, stats or inference access lines."""
    READY = "ready"
    """The line that made the server ready."""
    WARNING = "warning"
    ERROR = "error"
    """An error-level line or an exception line outside a traceback."""
    TRACEBACK = "traceback"
    """A traceback's header, frames, code lines and its closing exception line."""
    CRASH = "crash"
    """A line only printed when the server is dying (a crash marker, a fatal line, a native abort)."""
    STOP = "stop"
    """Shutdown evidence (a signal received, teardown wording)."""


@dataclass(frozen=True, slots=True)
class ClassifiedLine:
    """One log line as the tracker read it."""

    no: int
    """The line's number in the stream (1-based)."""
    text: str
    """The line without colour codes and outer wrappers (the engine's own prefix kept)."""
    kind: LineKind
    """What the line is."""
    bar: str | None = None
    """For a progress-bar line, the bar's identity (who printed it and the bar's label): consecutive lines
    with the same `bar` are redraws of one bar, which a view may collapse into one updating line."""
