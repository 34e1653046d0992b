"""The startup tracker: log text, process exits, health answers and clock ticks in; typed events out.

One `StartupTracker` follows one server launch. It feeds each log line to the engine's rules
(`specdash.engines`) and turns their per-line observations into events, with these rules:

- **Forward only.** A phase earlier than (or equal to) the current one along the engine's startup order is
  ignored, and so is progress that does not advance within the current phase. TP ranks each print their own
  lines, slightly out of step, so this is what keeps the bar from flickering back.
- **Crashes need proof.** A `Traceback` alone is not a crash: harmless warnings print tracebacks too, and the
  exception line at its end only raises a `Suspect`. A crash is declared when
  1. a self-explaining fatal line arrives (`[Errno 98] ... address already in use`, `Not enough memory`,
     `Capture cuda graph failed`), or
  2. a crash marker (`Scheduler hit an exception`, `Received sigquit`, `EngineCore failed to start.`, ...)
     has been seen and then the exception line of its traceback arrives, or the marker follows a
     traceback whose exception line already arrived, or
  3. the process exits (`process_exited`), or a pending marker got no exception line within `crash_grace`
     seconds (`tick`) or before the end of the stream (`finish`).

  The reason is the exception line when there is one (the root cause: the first after the marker), else
  the most specific marker; the excerpt is the log's tail from just before the traceback.
- **Never raises.** Each line is processed under a guard; a parser bug is counted in `internal_errors`
  (the tests require 0) instead of taking down the watcher.
- **Stuck.** `tick(now)` emits `Stuck` once per phase when neither the phase nor its progress moved for
  longer than that phase's timeout. Progress resets the clock: a 40-minute load that keeps advancing is fine.

Time: pass `now` (any monotonic clock) with every call in live use. Without `now` (replay), the log's own
timestamps are the clock, never going backwards; lines before the first timestamp get `started_at`.
"""

from __future__ import annotations

import codecs
from collections import deque
from collections.abc import Mapping

from specdash.core.lines import LineSplitter
from specdash.core.models import CrashInfo, Phase, Progress
from specdash.core.startup_events import (
    Crashed,
    Exited,
    MetricsSeen,
    PhaseChanged,
    ProgressChanged,
    Ready,
    StartupEvent,
    Stuck,
    Suspect,
    VersionSeen,
)
from specdash.core.stuck import DEFAULT_STUCK_TIMEOUTS, StuckLimit
from specdash.engines.base import (
    CrashKind,
    CrashSignal,
    EngineRules,
    HealthState,
    LogLine,
    Observation,
    PhaseHint,
    ProgressHint,
    SuspectHint,
    VersionHint,
)
from specdash.engines.registry import make_rules

# The stuck limits and their rules live in `core.stuck`; the tracker applies them.


CRASH_GRACE = 5.0
"""Seconds a crash marker waits for its traceback's exception line before the crash is declared anyway."""

# How far back (in lines) an exception line still explains a later marker or exit.
_EXCEPTION_WINDOW = 60
# The excerpt: at least this many last lines, and back to the traceback start if it is within _MAX_EXCERPT.
_EXCERPT_LINES = 30
_MAX_EXCERPT = 120
_MAX_SUSPECTS = 100
# Exit codes that mean "stopped on purpose" after ready: 0, SIGTERM (-15 / 143), SIGINT (-2 / 130).
_CLEAN_EXIT = frozenset({0, -15, 143, -2, 130})


class StartupTracker:
    """Follows one server launch; see the module docstring for the rules.

    Args:
        engine: An engine name (`sglang`, `vllm`) or a rules object.
        started_at: When the launch began (in the caller's clock); also the replay clock before the first
            log timestamp.
        stuck_timeouts: Per-phase stuck timeouts in seconds, merged over `DEFAULT_STUCK_TIMEOUTS`.
        stuck_limits: Per-phase limits with the rule that set each (`core.stuck.stuck_limits`), merged last.
        crash_grace: Seconds a pending crash marker waits for its exception line.
    """

    def __init__(
        self,
        engine: str | EngineRules,
        *,
        started_at: float | None = None,
        stuck_timeouts: Mapping[Phase, float] | None = None,
        stuck_limits: Mapping[Phase, StuckLimit] | None = None,
        crash_grace: float = CRASH_GRACE,
    ) -> None:
        self._rules = make_rules(engine) if isinstance(engine, str) else engine
        self._order = {phase: i for i, phase in enumerate(self._rules.startup_order)}
        self._timeouts: dict[Phase, StuckLimit] = {
            **{phase: StuckLimit(seconds, "default") for phase, seconds in DEFAULT_STUCK_TIMEOUTS.items()},
            **{phase: StuckLimit(seconds, "given") for phase, seconds in (stuck_timeouts or {}).items()},
            **(stuck_limits or {}),
        }
        self._grace = crash_grace
        self._splitter = LineSplitter()
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

        self._phase = Phase.LAUNCHING
        self._terminal: Phase | None = None
        self._progress: Progress | None = None
        self._crash: CrashInfo | None = None
        self.started_at = started_at
        """When the launch began, or the first line's time when not given."""
        self._log_clock = started_at
        self._last_at = started_at
        self._activity = started_at
        self._stuck_reported = False

        self._lines: deque[str] = deque(maxlen=_MAX_EXCERPT)
        self._line_no = 0
        self._traceback_no = 0
        self._exception: str | None = None
        self._exception_no = -(10**9)
        self._pending: CrashSignal | None = None
        self._pending_since = 0.0
        self._suspects: set[str] = set()
        self._health: HealthState | None = None
        self.internal_errors = 0
        """Lines whose processing raised (a bug in a rule); they are skipped, never re-raised."""

    # -- state ------------------------------------------------------------------------------------------

    @property
    def engine(self) -> str:
        """The engine's name."""
        return self._rules.name

    @property
    def phase(self) -> Phase:
        """The current phase: a startup phase, READY, or CRASHED / EXITED once terminal."""
        return self._terminal or self._phase

    @property
    def highest(self) -> Phase:
        """The furthest startup phase reached (kept after a crash)."""
        return self._phase

    @property
    def progress(self) -> Progress | None:
        """Progress inside the current phase, if it reported any."""
        return self._progress

    @property
    def crash(self) -> CrashInfo | None:
        """Why the server crashed, once it did."""
        return self._crash

    @property
    def last_time(self) -> float | None:
        """The time of the last input (line, health answer, tick or exit)."""
        return self._last_at

    # -- inputs -----------------------------------------------------------------------------------------

    def feed(self, chunk: str | bytes, now: float | None = None) -> list[StartupEvent]:
        """Add a chunk of log output (any size, split anywhere); return the events its complete lines caused."""
        try:
            text = self._decoder.decode(chunk) if isinstance(chunk, bytes) else chunk
            lines = self._splitter.feed(text)
        except Exception:  # noqa: BLE001 - the tracker must survive any input
            self.internal_errors += 1
            return []
        events: list[StartupEvent] = []
        for line in lines:
            events += self.feed_line(line, now)
        return events

    def feed_line(self, raw: str, now: float | None = None) -> list[StartupEvent]:
        """Process one complete line (without its line break)."""
        events: list[StartupEvent] = []
        try:
            self._process(raw, now, events)
        except Exception:  # noqa: BLE001 - a rule bug must not take down the watcher; counted instead
            self.internal_errors += 1
        return events

    def finish(self, now: float | None = None) -> list[StartupEvent]:
        """End of the stream (replay, or the log file went away): flush a partial line, settle a pending crash."""
        events: list[StartupEvent] = []
        try:
            rest = self._decoder.decode(b"", final=True)
            for line in self._splitter.feed(rest) + self._splitter.flush():
                events += self.feed_line(line, now)
            if self._pending is not None and self._terminal is None:
                self._declare(self._reason(self._pending.text), self._at(None, now), events)
        except Exception:  # noqa: BLE001
            self.internal_errors += 1
        return events

    def process_exited(self, code: int | None, at: float) -> list[StartupEvent]:
        """The server's main process ended with `code` (None when unknown).

        Before ready every exit is a crash. After ready, 0 / SIGTERM / SIGINT is a normal `Exited`.
        """
        events: list[StartupEvent] = []
        self._last_at = at
        if self._terminal is not None:
            return events
        if self._phase is Phase.READY and self._pending is None and code in _CLEAN_EXIT:
            self._terminal = Phase.EXITED
            events.append(Exited(code if code is not None else 0, at))
            return events
        how = "with code unknown" if code is None else f"with code {code}"
        fallback = self._pending.text if self._pending else f"process exited {how} while {self._phase}"
        self._declare(self._reason(fallback), at, events, exit_code=code)
        return events

    def health(self, status: int | None, at: float) -> list[StartupEvent]:
        """A `/health` answer: an HTTP status, or None for a refused connection."""
        events: list[StartupEvent] = []
        self._last_at = at
        if self._terminal is not None:
            return events
        state = self._rules.health_state(status, ready=self._phase is Phase.READY)
        changed, self._health = state != self._health, state
        line = f"GET /health -> {'connection refused' if status is None else status}"
        if state is HealthState.READY:
            self._advance(Phase.READY, at, line, events)
        elif state is HealthState.WARMING_UP:
            self._advance(Phase.WARMING_UP, at, line, events)
        elif state is HealthState.DEAD:
            self._declare(f"engine dead: {line}", at, events)
        elif state is HealthState.UNHEALTHY and changed:
            events.append(Suspect(f"unhealthy after ready: {line}", at))
        return events

    def tick(self, now: float) -> list[StartupEvent]:
        """Time passes: settle a pending crash after the grace, report a stuck phase."""
        events: list[StartupEvent] = []
        self._last_at = now
        if self._terminal is not None:
            return events
        if self._pending is not None and now - self._pending_since >= self._grace:
            self._declare(self._reason(self._pending.text), now, events)
            return events
        if self._activity is None:
            self._activity = now
        limit = self._timeouts.get(self._phase)
        if limit is not None and not self._stuck_reported and now - self._activity > limit.seconds:
            self._stuck_reported = True
            events.append(Stuck(self._phase, self._activity, now, limit.seconds, limit.rule))
        return events

    # -- internals --------------------------------------------------------------------------------------

    def _at(self, log_time: float | None, now: float | None) -> float:
        if log_time is not None and (self._log_clock is None or log_time > self._log_clock):
            self._log_clock = log_time
        if now is not None:
            return now
        return self._log_clock if self._log_clock is not None else 0.0

    def _process(self, raw: str, now: float | None, events: list[StartupEvent]) -> None:
        line = self._rules.clean(raw)
        at = self._at(line.time, now)
        if self.started_at is None:
            self.started_at = at
        if self._activity is None:
            self._activity = at
        self._last_at = at
        self._line_no += 1
        self._lines.append(line.raw)
        for observation in self._rules.observe(line):
            self._apply(observation, line, at, events)

    def _apply(self, obs: Observation, line: LogLine, at: float, events: list[StartupEvent]) -> None:
        if isinstance(obs, VersionHint):
            events.append(VersionSeen(obs.version, obs.exact, at))
        elif isinstance(obs, SuspectHint):
            self._suspect(obs.text, at, events)
        elif self._terminal is not None:
            # After a crash or exit only metrics still flow (other ranks keep printing for a moment).
            if not isinstance(obs, PhaseHint | ProgressHint | CrashSignal):
                events.append(MetricsSeen(obs, at, line.rank))
        elif isinstance(obs, PhaseHint):
            self._advance(obs.phase, at, line.raw, events)
        elif isinstance(obs, ProgressHint):
            self._advance(obs.phase, at, line.raw, events)
            self._advance_progress(obs.phase, obs.progress, at, events)
        elif isinstance(obs, CrashSignal):
            self._crash_signal(obs, at, events)
        else:
            events.append(MetricsSeen(obs, at, line.rank))

    def _advance(self, phase: Phase, at: float, line: str, events: list[StartupEvent]) -> None:
        if self._terminal is not None or self._order.get(phase, -1) <= self._order.get(self._phase, -1):
            return
        previous, self._phase = self._phase, phase
        self._progress = None
        self._activity = at
        self._stuck_reported = False
        events.append(PhaseChanged(phase, at, line, previous))
        if phase is Phase.READY:
            events.append(Ready(at, line))

    def _advance_progress(self, phase: Phase, progress: Progress, at: float, events: list[StartupEvent]) -> None:
        if phase is not self._phase or progress.total <= 0:
            return
        old = self._progress
        if old is not None and progress.fraction <= old.fraction:
            return
        self._progress = progress
        self._activity = at
        self._stuck_reported = False
        events.append(ProgressChanged(phase, progress, at))

    def _current_exception(self) -> str | None:
        """The exception line of the latest traceback, if it is recent enough to explain a crash."""
        if self._exception_no >= self._traceback_no and self._line_no - self._exception_no <= _EXCEPTION_WINDOW:
            return self._exception
        return None

    def _reason(self, fallback: str) -> str:
        return self._current_exception() or fallback

    def _crash_signal(self, signal: CrashSignal, at: float, events: list[StartupEvent]) -> None:
        if signal.kind is CrashKind.TRACEBACK:
            self._traceback_no = self._line_no
        elif signal.kind is CrashKind.EXCEPTION:
            self._exception, self._exception_no = signal.text, self._line_no
            if self._pending is not None:
                self._declare(signal.text, at, events)
            else:
                self._suspect(signal.text, at, events)
        elif signal.kind is CrashKind.FATAL:
            self._declare(self._reason(signal.text), at, events)
        else:
            # A marker right after a finished traceback explains itself (`Rank 0 scheduler is dead`); a
            # marker that opens a traceback (`Scheduler hit an exception: Traceback`) waits for its end.
            explained = self._traceback_no != self._line_no and self._current_exception()
            if explained:
                self._declare(explained, at, events)
                return
            if self._pending is None:
                self._pending, self._pending_since = signal, at
            elif signal.weight > self._pending.weight:
                self._pending = signal

    def _suspect(self, reason: str, at: float, events: list[StartupEvent]) -> None:
        if reason in self._suspects or len(self._suspects) >= _MAX_SUSPECTS:
            return
        self._suspects.add(reason)
        events.append(Suspect(reason, at))

    def _excerpt(self) -> tuple[str, ...]:
        lines = list(self._lines)
        keep = _EXCERPT_LINES
        back_to_traceback = self._line_no - self._traceback_no + 3  # two lines of context before it
        if self._traceback_no > 0 and back_to_traceback <= _MAX_EXCERPT:
            keep = max(keep, back_to_traceback)
        return tuple(lines[-keep:])

    def _declare(self, reason: str, at: float, events: list[StartupEvent], exit_code: int | None = None) -> None:
        if self._terminal is not None:
            return
        self._crash = CrashInfo(reason=reason, excerpt=self._excerpt())
        self._terminal = Phase.CRASHED
        self._pending = None
        events.append(Crashed(self._crash, at, self._phase, exit_code))
