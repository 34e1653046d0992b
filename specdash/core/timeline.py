"""A startup's timeline: which phases it passed, when, for how long, and how it ended.

Built from the tracker's events (`Timeline.apply`), it serves `specdash replay` and the startup history
behind the ETA: `history_record()` is exactly the phase-name -> seconds mapping `core.eta` reads, and is
only given for startups that reached ready (a crashed startup's durations would skew the medians).

`replay_file` streams a saved log through a fresh tracker in bounded memory (the engine is detected from
the first lines); `as_dict()` is the JSON of `specdash replay --json` (schema in the README).
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import BinaryIO

from specdash.core.lines import LineSplitter
from specdash.core.startup import StartupTracker
from specdash.core.startup_events import (
    Crashed,
    Decision,
    Exited,
    MetricsSeen,
    Outcome,
    PhaseChanged,
    ProgressChanged,
    Ready,
    Serving,
    StartupEvent,
    Stopping,
    Stuck,
    Suspect,
    VersionSeen,
)
from specdash.engines.metrics import ServerLimits
from specdash.engines.registry import UNKNOWN, detect_engine, make_rules
from specdash.phases import Phase, Progress

__all__ = ["Outcome", "PhaseSpan", "Timeline", "replay_file", "replay_lines", "replay_text"]

DETECT_LINES = 2000
"""A replay detects the engine from this many first lines (held in memory meanwhile)."""
DETECT_BYTES = 4 * 1024 * 1024
"""... or from the lines in this many first bytes, whichever is less."""
_CHUNK = 1024 * 1024


@dataclass(frozen=True, slots=True)
class PhaseSpan:
    """One phase of one startup."""

    phase: Phase
    """The phase."""
    start: float
    """When it was entered."""
    end: float | None = None
    """When the next phase (or ready, or the crash) began; None while it is the current phase."""
    progress: Progress | None = None
    """The last progress reported inside it."""

    @property
    def duration(self) -> float | None:
        """Seconds spent in the phase, once it is over."""
        return None if self.end is None else max(0.0, self.end - self.start)


@dataclass
class Timeline:
    """The phases of one startup and its outcome, accumulated from tracker events."""

    engine: str = ""
    """`sglang` or `vllm`."""
    start: float | None = None
    """When the startup began (the launch, or the first log line of a replay)."""
    spans: list[PhaseSpan] = field(default_factory=list)
    """Phases in the order entered (READY is the outcome, not a span)."""
    outcome: Outcome = Outcome.INCOMPLETE
    """How it ended so far."""
    reason: str = ""
    """For a crash, the reason (the exception line when there was one)."""
    excerpt: tuple[str, ...] = ()
    """For a crash, the log lines before it (traceback included)."""
    end: float | None = None
    """When it became ready or crashed."""
    last_seen: float | None = None
    """The last input seen; an incomplete last phase has lasted at least until then."""
    exited_at: float | None = None
    """When a ready server exited normally."""
    versions: list[str] = field(default_factory=list)
    """Engine versions or version ranges seen in the log."""
    suspects: list[str] = field(default_factory=list)
    """Warnings: tracebacks without a crash, stuck phases, odd values."""
    limits: ServerLimits | None = None
    """Capacity figures from startup (the last seen)."""
    reached_ready: bool = False
    """True once it was ready (it may have served, stopped or crashed since)."""
    decision: Decision | None = None
    """The tracker's decision and its deciding line (set by a replay; live viewers ask the tracker)."""
    lines: int = 0
    """How many log lines were read (replay)."""
    evidence_lines: int = 0
    """How many of them meant anything to the rules (0: not a server log)."""

    @classmethod
    def from_events(cls, events: Iterable[StartupEvent], *, engine: str = "", start: float | None = None) -> Timeline:
        """A timeline built from a sequence of events."""
        timeline = cls(engine=engine, start=start)
        for event in events:
            timeline.apply(event)
        return timeline

    def apply(self, event: StartupEvent) -> None:
        """Fold one tracker event in."""
        at = getattr(event, "at", None)
        if isinstance(at, float | int):
            self.last_seen = float(at) if self.last_seen is None else max(self.last_seen, float(at))
        if isinstance(event, PhaseChanged):
            self._enter(event.phase, event.at)
        elif isinstance(event, ProgressChanged):
            if self.spans and self.spans[-1].phase is event.phase:
                self.spans[-1] = replace(self.spans[-1], progress=event.progress)
        elif isinstance(event, Ready):
            self.outcome, self.end, self.reached_ready = Outcome.READY, event.at, True
        elif isinstance(event, Serving):
            self.reached_ready = True
            if self.outcome is Outcome.READY and event.alive:
                self.outcome = Outcome.SERVING
        elif isinstance(event, Stopping):
            if self.outcome is not Outcome.CRASHED:
                self._close(event.at)
                self.outcome = Outcome.STOPPED
        elif isinstance(event, Crashed):
            self._close(event.at)
            self.outcome, self.reason, self.excerpt = Outcome.CRASHED, event.info.reason, event.info.excerpt
            self.end = event.at if self.end is None else self.end
        elif isinstance(event, Exited):
            self.exited_at = event.at
            if self.outcome is not Outcome.CRASHED:
                self.outcome = Outcome.STOPPED
        elif isinstance(event, Suspect):
            self.suspects.append(event.reason)
        elif isinstance(event, Stuck):
            self.suspects.append(event.reason)
        elif isinstance(event, VersionSeen):
            if event.version not in self.versions:
                self.versions.append(event.version)
        elif isinstance(event, MetricsSeen) and isinstance(event.metrics, ServerLimits):
            self.limits = event.metrics

    def close(self, at: float | None) -> None:
        """The input ended at `at` (for replay: the last line's time)."""
        if at is not None:
            self.last_seen = at if self.last_seen is None else max(self.last_seen, at)

    def _enter(self, phase: Phase, at: float) -> None:
        if not self.spans and self.start is not None and at > self.start and phase is not Phase.LAUNCHING:
            # The launch itself is a phase too: from the start until the first sign of another phase.
            self.spans.append(PhaseSpan(Phase.LAUNCHING, self.start))
        self._close(at)
        if phase is not Phase.READY:
            self.spans.append(PhaseSpan(phase, at))

    def _close(self, at: float) -> None:
        if self.spans and self.spans[-1].end is None:
            self.spans[-1] = replace(self.spans[-1], end=max(at, self.spans[-1].start))

    # -- reading ----------------------------------------------------------------------------------------

    @property
    def highest_phase(self) -> Phase:
        """READY if it got there, else the last phase entered (LAUNCHING when none was seen)."""
        if self.reached_ready:
            return Phase.READY
        return self.spans[-1].phase if self.spans else Phase.LAUNCHING

    @property
    def origin(self) -> float:
        """The zero of the relative times: the start, or the first span's start."""
        if self.start is not None:
            return self.start
        return self.spans[0].start if self.spans else 0.0

    def durations(self) -> dict[Phase, float]:
        """Seconds per finished phase (a phase entered twice cannot happen: phases only move forward)."""
        return {span.phase: span.duration for span in self.spans if span.duration is not None}

    def history_record(self) -> dict[str, float] | None:
        """Phase name -> seconds for the ETA history (`core.eta`), or None unless the startup reached ready."""
        if not self.reached_ready or self.outcome is Outcome.CRASHED:
            return None
        return {phase.value: seconds for phase, seconds in self.durations().items()}

    def total(self) -> float | None:
        """Seconds from the start to ready / crash, or to the last input while incomplete."""
        until = self.end if self.end is not None else self.last_seen
        return None if until is None else max(0.0, until - self.origin)

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready summary; times are seconds relative to `origin`."""
        origin = self.origin
        phases: list[dict[str, object]] = []
        for span in self.spans:
            open_for = None if self.last_seen is None else max(0.0, self.last_seen - span.start)
            state = "done" if span.end is not None else "current"
            if span is self.spans[-1] and self.outcome is Outcome.CRASHED:
                state = "crashed"
            phases.append(
                {
                    "phase": span.phase.value,
                    "start": round(span.start - origin, 3),
                    "duration": round(span.duration, 3) if span.duration is not None else None,
                    "at_least": round(open_for, 3) if span.end is None and open_for is not None else None,
                    "state": state,
                    "progress": None if span.progress is None else asdict(span.progress),
                }
            )
        total = self.total()
        decision = self.decision
        decided_by = None
        if decision is not None and decision.outcome is not Outcome.INCOMPLETE:
            decided_by = {"line": decision.line_no, "text": decision.line}
        return {
            "engine": self.engine,
            "outcome": self.outcome.value,
            "reason": self.reason or None,
            "decided_by": decided_by,
            "highest_phase": self.highest_phase.value,
            "lines": self.lines,
            "total": None if total is None else round(total, 3),
            "phases": phases,
            "versions": list(self.versions),
            "suspects": list(self.suspects),
            "limits": None if self.limits is None else asdict(self.limits),
        }


def replay_text(text: str, engine: str = "auto") -> Timeline:
    """Run a whole saved log (as text) through a fresh tracker and return its timeline (see `replay_lines`)."""
    splitter = LineSplitter()  # lines cut at its bound, as a file's are: a 4 MB line of NULs is no one line
    return replay_lines(iter([*splitter.feed(text), *splitter.flush()]), engine)


def replay_file(stream: BinaryIO, engine: str = "auto", launched: float | None = None) -> Timeline:
    """Stream a saved log file through a fresh tracker, in bounded memory (`replay_lines`)."""
    return replay_lines(_file_lines(stream), engine, launched)


def text_encoding(head: bytes) -> str:
    """The encoding of a log from its first bytes: UTF-16 by its byte-order mark, or without one by the NULs
    of ASCII text in UTF-16 (a log saved by PowerShell's `>` or Notepad); else UTF-8 (a UTF-8 BOM skipped)."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    if head.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    sample = head[:4096] if len(head) % 2 == 0 else head[: min(4096, len(head) - 1)]
    if len(sample) >= 8:
        even, odd = sample[0::2], sample[1::2]
        if odd.count(0) > 0.9 * len(odd) and even.count(0) < 0.1 * len(even):
            return "utf-16-le"
        if even.count(0) > 0.9 * len(even) and odd.count(0) < 0.1 * len(odd):
            return "utf-16-be"
    return "utf-8"


def _file_lines(stream: BinaryIO) -> Iterator[str]:
    first = stream.read(_CHUNK)
    decoder = codecs.getincrementaldecoder(text_encoding(first))(errors="replace")
    splitter = LineSplitter()
    chunk = first
    while chunk:
        yield from splitter.feed(decoder.decode(chunk))
        chunk = stream.read(_CHUNK)
    yield from splitter.feed(decoder.decode(b"", final=True))
    yield from splitter.flush()


def replay_lines(lines: Iterator[str], engine: str = "auto", launched: float | None = None) -> Timeline:
    """Run a saved log's lines through a fresh tracker and return its timeline.

    The log's own timestamps are the clock; lines before the first timestamp count from it, or from the launch
    when it is known. The end of the lines is the end of the evidence (`StartupTracker.finish`).

    Args:
        lines: The log's lines, in order.
        engine: An engine name, `unknown`, or `auto` to detect it from the first `DETECT_LINES` lines.
        launched: When the process was launched (seconds since 1970, as a run record has it), for a log whose
            launch is known: the timeline then counts from the launch, Python's 15-20 s of imports before the
            first line included (a validation crash 19 s after launch, not 0 s).
    """
    head: list[str] = []
    size = 0
    for line in lines:
        head.append(line)
        size += len(line)
        if len(head) >= DETECT_LINES or size >= DETECT_BYTES:
            break
    name = detect_engine(head, default=UNKNOWN) if engine == "auto" else engine
    rules = make_rules(name)
    first = next((t for t in (rules.clean(line).time for line in head) if t is not None), None)
    if launched is not None:
        first = rules.log_clock(launched) if first is None else min(first, rules.log_clock(launched))
    tracker = StartupTracker(make_rules(name), started_at=first)
    timeline = Timeline(engine=name, start=first)
    evidence = 0

    def feed(line: str) -> None:
        nonlocal evidence
        for event in tracker.feed_line(line):
            timeline.apply(event)
        if tracker.observed_last:
            evidence += 1

    for line in head:
        feed(line)
    del head
    for line in lines:
        feed(line)
    for event in tracker.finish():
        timeline.apply(event)
    if timeline.start is None:
        timeline.start = tracker.started_at
    timeline.close(tracker.last_time)
    timeline.decision = tracker.decision
    timeline.lines = tracker.lines_seen
    timeline.evidence_lines = evidence
    return timeline
