"""The typed events `core.startup.StartupTracker` emits; the watcher turns them into UI messages.

`at` is always in the caller's clock: the `now` passed to `feed`/`health`/`tick`, or the log's own
timestamps when no `now` is given (replay).
"""

from __future__ import annotations

from dataclasses import dataclass

from specdash.core.models import CrashInfo, Phase, Progress
from specdash.engines.base import Metrics


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


StartupEvent = PhaseChanged | ProgressChanged | Ready | Crashed | Exited | Suspect | Stuck | MetricsSeen | VersionSeen
"""Everything the tracker emits."""
