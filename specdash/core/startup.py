"""The startup tracker: log text, process exits, health answers and clock ticks in; typed events out.

One `StartupTracker` follows one server launch. It feeds each log line to the engine's rules
(`specdash.engines`) and turns their per-line observations into events, with these rules:

- **Forward only.** A phase earlier than (or equal to) the current one along the engine's startup order is
  ignored, and so is progress that does not advance within the current phase (except a bar that starts
  over at 0 after it finished: a second pass, such as a reload). TP ranks each print their own
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
- **Engine-agnostic evidence beneath the engine's rules** (`engines.evidence`): tracebacks by their grammar
  (with or without header or indentation), exception lines, death lines, native aborts, serving and
  shutdown evidence, tqdm bars.
- **Serving proves ready.** Serving evidence (batch, stats, inference access lines) before the warm-up phase
  moves the startup to ready (an excerpt that starts in the middle of serving); in the warm-up phase it is
  the warm-up's own request and proves nothing.
- **A stop is not a crash.** Shutdown evidence (a SIGTERM/SIGINT received, teardown wording) makes the
  outcome `stopped`; crash signals after it are the teardown (vLLM prints an `EngineDeadError` traceback
  while a SIGTERM stop tears the engine down). Teardown wording right after crash evidence is that crash's
  teardown, and a pending crash marker is not undone by a stop.
- **The later evidence wins, and the end is the end.** A traceback or exception line is only a suspicion
  while the server goes on (later serving or startup progress clears it); when the stream ends (`finish`)
  with crash evidence that nothing after it contradicts, that is a crash. `decision` always says which
  outcome the evidence supports and which line decided it.
- **Never raises.** Each line is processed under a guard; a parser bug is counted in `internal_errors`
  (the tests require 0) instead of taking down the watcher.
- **Stuck.** `tick(now)` emits `Stuck` once per phase when neither the phase nor its progress moved for
  longer than that phase's timeout. Progress resets the clock: a 40-minute load that keeps advancing is fine.

Lines, classified: `feed_lines(lines)` returns, beside the events, one `ClassifiedLine` per line: the line
cleaned once (colour codes and wrappers off), its `LineKind` (normal, progress, serving, ready, warning,
error, traceback, crash, stop) and, for a progress bar, the bar's identity (`bar`: its printer and label;
consecutive lines with the same `bar` redraw one bar, so a view may show them as one updating line). A log
view colours lines from these instead of reading them a second time; `last_line` is the latest one.

Time: pass `now` (any monotonic clock) with every call in live use. Without `now` (replay), the log's own
timestamps are the clock, never going backwards; lines before the first timestamp get `started_at`.
"""

from __future__ import annotations

import codecs
import re
from collections import deque
from collections.abc import Mapping

from specdash.core.lines import LineSplitter
from specdash.core.startup_events import (
    ClassifiedLine,
    Crashed,
    Decision,
    Exited,
    LineKind,
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
    ServingHint,
    StopHint,
    SuspectHint,
    VersionHint,
)
from specdash.engines.registry import make_rules
from specdash.engines.text import bar_label
from specdash.phases import CrashInfo, Phase, Progress
from specdash.safetext import escape_controls

# The stuck limits and their rules live in `core.stuck`; the tracker applies them.


CRASH_GRACE = 5.0
"""Seconds a crash marker waits for its traceback's exception line before the crash is declared anyway."""

# How far back (in lines) an exception line still explains a later marker or exit.
_EXCEPTION_WINDOW = 60
# The excerpt: at least this many last lines, and back to the traceback start if it is within _MAX_EXCERPT.
_EXCERPT_LINES = 30
_MAX_EXCERPT = 120
# A kept line is cut to this many characters: a log line of megabytes without a break arrives in pieces of
# up to 256 KB (`core.lines.MAX_LINE_BYTES`), and 120 of them would hold 30 MB for an excerpt nobody reads
# that far into (the log view cuts at 4,096 too).
_EXCERPT_LINE_CHARS = 4_096
_MAX_SUSPECTS = 100
# Exit codes that mean "stopped on purpose" after ready: 0, SIGTERM (-15 / 143), SIGINT (-2 / 130).
_CLEAN_EXIT = frozenset({0, -15, 143, -2, 130})
# A level word near the start of a message that carried no parsed level (SGLang prints `WARNING ...`).
_LEVEL_WORD = re.compile(r"\b(ERROR|CRITICAL|FATAL|WARNING|WARN)\b")
# Lines that continue a traceback whatever their indentation: chained-exception headers and caret markers.
_TB_CONTINUATION = ("During handling of the above exception", "The above exception was the direct cause")


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
        self._progress_rank = ""
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
        # The latest crash evidence nothing has contradicted yet: (line number, line, reason text).
        self._unresolved: tuple[int, str, str] | None = None
        self._tb_start: tuple[int, str] | None = None
        self._pending_line: tuple[int, str] = (0, "")
        self._exception_line: tuple[int, str] = (0, "")
        self._stopped: Stopping | None = None
        self._stop_signalled = False
        self._before_stop: Decision = Decision(Outcome.INCOMPLETE, None, "")
        """A received signal was named at or after the stop (then nothing after it undoes the stop)."""
        self._serving = False
        self._decision = Decision()
        self._in_tb = False
        self._expect_code = False
        self._kind = LineKind.NORMAL
        self._bar: str | None = None
        self.observed_last = False
        """Whether the latest line meant anything to the rules (a replay counts these: 0 is no server log)."""
        self.last_line: ClassifiedLine | None = None
        """The latest line, classified (see the module docstring)."""
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
    def decision(self) -> Decision:
        """The outcome the evidence so far supports, and the line that decided it."""
        return self._decision

    @property
    def stopped(self) -> Stopping | None:
        """The shutdown evidence, once the log showed an intentional stop."""
        return self._stopped

    @property
    def lines_seen(self) -> int:
        """How many lines were read."""
        return self._line_no

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

    def feed_lines(self, lines: list[str], now: float | None = None) -> tuple[list[StartupEvent], list[ClassifiedLine]]:
        """Process complete lines; return the events they caused and each line classified."""
        events: list[StartupEvent] = []
        classified: list[ClassifiedLine] = []
        for raw in lines:
            before = self._line_no
            events += self.feed_line(raw, now)
            last = self.last_line
            if last is None or last.no != self._line_no or self._line_no == before:
                # A rule bug cost this line (counted in internal_errors): show it plain.
                self._line_no = before + 1
                last = self.last_line = ClassifiedLine(self._line_no, escape_controls(raw), LineKind.NORMAL)
            classified.append(last)
        return events, classified

    def finish(self, now: float | None = None) -> list[StartupEvent]:
        """End of the stream (replay, or the log file went away): flush a partial line, settle a pending crash."""
        events: list[StartupEvent] = []
        try:
            rest = self._decoder.decode(b"", final=True)
            for line in self._splitter.feed(rest) + self._splitter.flush():
                events += self.feed_line(line, now)
            if self._terminal is None and self._stopped is None:
                at = self._at(None, now)
                if self._pending is not None:
                    self._declare(self._reason(self._pending.text), at, events, decided=self._crash_line())
                elif self._unresolved is not None:
                    # The end of the stream is the end of the evidence: nothing after the crash evidence
                    # showed the server alive.
                    no, line, reason = self._unresolved
                    self._declare(reason, at, events, decided=(no, line))
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
        clean_after_ready = self._phase is Phase.READY and self._pending is None and code in _CLEAN_EXIT
        if self._stopped is not None or clean_after_ready:
            self._terminal = Phase.EXITED
            events.append(Exited(code if code is not None else 0, at))
            if self._stopped is None:
                self._decision = Decision(Outcome.STOPPED, None, f"process exited with code {code}")
            return events
        how = "with code unknown" if code is None else f"with code {code}"
        fallback = self._pending.text if self._pending else f"process exited {how} while {self._phase}"
        decided = self._crash_line() if self._pending else None
        self._declare(self._reason(fallback), at, events, exit_code=code, decided=decided)
        return events

    def health(self, status: int | None, at: float) -> list[StartupEvent]:
        """A `/health` answer: an HTTP status, or None for a refused connection."""
        events: list[StartupEvent] = []
        self._last_at = at
        if self._terminal is not None or self._stopped is not None:
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
        if self._terminal is not None or self._stopped is not None:
            return events
        if self._pending is not None and now - self._pending_since >= self._grace:
            self._declare(self._reason(self._pending.text), now, events, decided=self._crash_line())
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
        raw = line.raw
        if len(raw) > _EXCERPT_LINE_CHARS:
            raw = f"{raw[:_EXCERPT_LINE_CHARS]} … ({len(raw) - _EXCERPT_LINE_CHARS:,} more characters)"
        self._lines.append(raw)
        self._kind, self._bar = LineKind.NORMAL, None
        observations = self._rules.observe(line)
        self.observed_last = bool(observations)
        for observation in observations:
            self._apply(observation, line, at, events)
        self.last_line = ClassifiedLine(self._line_no, line.raw, self._classify(line, observations), self._bar)

    def _classify(self, line: LogLine, observations: list[Observation]) -> LineKind:
        """The line's kind; also follows the traceback grammar across lines (header, frames, code, exception)."""
        kind = self._kind  # set while applying: READY
        text = line.text
        crash = frame = exception = tb_header = False
        stop = serving = progress = False
        for obs in observations:
            if isinstance(obs, CrashSignal):
                if obs.kind in (CrashKind.MARKER, CrashKind.FATAL):
                    crash = True
                elif obs.kind is CrashKind.FRAME:
                    frame = True
                elif obs.kind is CrashKind.EXCEPTION:
                    exception = True
                else:
                    tb_header = True
            elif isinstance(obs, StopHint):
                stop = True
            elif isinstance(obs, ServingHint):
                serving = True
            elif isinstance(obs, ProgressHint):
                progress = True
        in_tb = self._in_tb
        if tb_header or frame:
            self._in_tb, self._expect_code = True, frame
            return LineKind.CRASH if crash else LineKind.TRACEBACK
        if in_tb:
            if exception:
                self._in_tb = self._expect_code = False
                return LineKind.TRACEBACK
            stripped = text.strip()
            if (
                not stripped
                or self._expect_code
                or stripped.strip("^~ ") == ""
                or stripped.startswith(_TB_CONTINUATION)
                or (text[:1] in " \t" and not crash)
            ):
                self._expect_code = False
                return LineKind.TRACEBACK
            self._in_tb = False
        if crash:
            return LineKind.CRASH
        if exception:
            return LineKind.ERROR
        if stop:
            return LineKind.STOP
        if kind is LineKind.READY:
            return kind
        label = bar_label(text) if progress or "%|" in text or "% Completed" in text else None
        if progress or label is not None:
            self._bar = f"{line.rank}|{label or ''}"
            return LineKind.PROGRESS
        level = line.level
        if not level and ("ERR" in text or "WARN" in text or "CRIT" in text or "FATAL" in text):
            m = _LEVEL_WORD.search(text, 0, 60)
            level = m.group(1) if m else ""
        if level in ("ERROR", "CRITICAL", "FATAL"):
            return LineKind.ERROR
        if level in ("WARNING", "WARN"):
            return LineKind.WARNING
        if serving:
            return LineKind.SERVING
        return LineKind.NORMAL

    def _apply(self, obs: Observation, line: LogLine, at: float, events: list[StartupEvent]) -> None:
        if isinstance(obs, VersionHint):
            events.append(VersionSeen(obs.version, obs.exact, at))
        elif isinstance(obs, SuspectHint):
            self._suspect(obs.text, at, events)
        elif self._unrequested_exit(obs):
            # The stop so far was teardown wording alone (no signal received), and now the server says one of
            # its processes exited *unexpectedly*: that teardown was the server reacting to a death (vLLM's
            # API server after its EngineCore was SIGKILLed), not a stop anyone asked for.
            self._stopped = None
            self._decision = self._before_stop
            self._kind = LineKind.NORMAL
            assert isinstance(obs, CrashSignal)
            self._crash_signal(obs, line, at, events)
        elif self._terminal is not None or self._stopped is not None:
            if isinstance(obs, StopHint) and obs.signal:
                self._stop_signalled = True
            # After a crash, exit or stop only metrics still flow (other ranks keep printing for a moment,
            # a draining server finishes its requests).
            if isinstance(obs, ServingHint):
                self._served_after_end(at, line, events)
            elif not isinstance(obs, PhaseHint | ProgressHint | CrashSignal | StopHint):
                events.append(MetricsSeen(obs, at, line.rank))
        elif isinstance(obs, PhaseHint):
            if self._advance(obs.phase, at, line.raw, events):
                self._alive()
        elif isinstance(obs, ProgressHint):
            moved = self._advance(obs.phase, at, line.raw, events)
            if self._advance_progress(obs.phase, obs.progress, at, events, line.rank) or moved:
                self._alive()
        elif isinstance(obs, CrashSignal):
            self._crash_signal(obs, line, at, events)
        elif isinstance(obs, ServingHint):
            self._serving_hint(obs, line, at, events)
        elif isinstance(obs, StopHint):
            self._stop_hint(obs, line, at, events)
        else:
            events.append(MetricsSeen(obs, at, line.rank))

    def _served_after_end(self, at: float, line: LogLine, events: list[StartupEvent]) -> None:
        """Requests failing after a crash (`failed (engine dead)`, HTTP 500) still prove the server had been
        serving, so ready was reached; the outcome stays."""
        if self._order.get(self._phase, -1) >= self._order.get(Phase.WARMING_UP, len(self._order)):
            return
        self._phase = Phase.READY  # `highest`; the crash or stop stays the outcome
        events.append(Serving(at, line.raw, alive=False))

    def _alive(self) -> None:
        """The server went on after the latest crash evidence: that evidence was no crash (yet)."""
        self._unresolved = None

    def _serving_hint(self, hint: ServingHint, line: LogLine, at: float, events: list[StartupEvent]) -> None:
        order = self._order.get(self._phase, -1)
        if order < self._order.get(Phase.WARMING_UP, len(self._order)):
            # Serving before warm-up can only mean the log began after the startup: it proves ready.
            self._advance(Phase.READY, at, line.raw, events)
        if not hint.alive or self._phase is not Phase.READY:
            return
        self._alive()
        if self._decision.outcome is not Outcome.SERVING:
            self._decision = Decision(Outcome.SERVING, self._line_no, line.raw)
            events.append(Serving(at, line.raw))

    def _unrequested_exit(self, obs: Observation) -> bool:
        """A death line saying a process exited or died unexpectedly, after a stop that named no signal."""
        stopped = self._stopped
        return (
            stopped is not None
            and self._terminal is None
            and not stopped.signal
            and not self._stop_signalled
            and isinstance(obs, CrashSignal)
            and obs.kind in (CrashKind.MARKER, CrashKind.FATAL)
            and "unexpectedly" in obs.text
        )

    def _stop_hint(self, hint: StopHint, line: LogLine, at: float, events: list[StartupEvent]) -> None:
        if self._pending is not None:
            return  # a dying-only line came first: the shutdown is the crash's
        recent = self._unresolved is not None and self._line_no - self._unresolved[0] <= _EXCEPTION_WINDOW
        if not hint.signal and recent:
            return  # teardown wording right after crash evidence: that crash's teardown
        self._unresolved = None
        self._before_stop = self._decision
        self._stopped = Stopping(at, line.raw, hint.signal)
        self._decision = Decision(Outcome.STOPPED, self._line_no, line.raw)
        self._kind = LineKind.STOP
        events.append(self._stopped)

    def _advance(self, phase: Phase, at: float, line: str, events: list[StartupEvent]) -> bool:
        if self._terminal is not None or self._order.get(phase, -1) <= self._order.get(self._phase, -1):
            return False
        previous, self._phase = self._phase, phase
        self._progress, self._progress_rank = None, ""
        self._activity = at
        self._stuck_reported = False
        events.append(PhaseChanged(phase, at, line, previous))
        if phase is Phase.READY:
            events.append(Ready(at, line))
            self._kind = LineKind.READY
            from_log = line.startswith("GET /health")
            self._decision = Decision(Outcome.READY, None if from_log else self._line_no, line)
        return True

    def _advance_progress(
        self, phase: Phase, progress: Progress, at: float, events: list[StartupEvent], rank: str = ""
    ) -> bool:
        if phase is not self._phase or progress.total <= 0:
            return False
        old = self._progress
        # A bar that finished and starts over at 0 from the same printer is a second pass (a reload).
        restarted = old is not None and old.done >= old.total and progress.done == 0 and rank == self._progress_rank
        if old is not None and progress.fraction <= old.fraction and not restarted:
            return False
        self._progress, self._progress_rank = progress, rank
        self._activity = at
        self._stuck_reported = False
        events.append(ProgressChanged(phase, progress, at))
        return True

    def _current_exception(self) -> str | None:
        """The exception line of the latest traceback, if it is recent enough to explain a crash."""
        if self._exception_no >= self._traceback_no and self._line_no - self._exception_no <= _EXCEPTION_WINDOW:
            return self._exception
        return None

    def _reason(self, fallback: str) -> str:
        return self._current_exception() or fallback

    def _crash_line(self) -> tuple[int, str]:
        """The line that names a crash declared from a pending marker: its exception line when that came
        after the marker's traceback started, else the marker."""
        if self._current_exception() is not None and self._exception_line[0] >= self._pending_line[0]:
            return self._exception_line
        return self._pending_line

    def _crash_signal(self, signal: CrashSignal, line: LogLine, at: float, events: list[StartupEvent]) -> None:
        no = self._line_no
        if signal.kind is CrashKind.TRACEBACK or (signal.kind is CrashKind.FRAME and not self._in_tb):
            # A header, or the first frame of a traceback pasted without its header.
            self._traceback_no = no
            self._tb_start = (no, line.raw)
            if self._unresolved is None:
                self._unresolved = (no, line.raw, signal.text)
        elif signal.kind is CrashKind.FRAME:
            pass
        elif signal.kind is CrashKind.EXCEPTION:
            self._exception, self._exception_no = signal.text, no
            self._exception_line = (no, line.raw)
            self._unresolved = (no, line.raw, signal.text)
            if self._pending is not None:
                self._declare(signal.text, at, events, decided=(no, line.raw))
            else:
                self._suspect(signal.text, at, events)
        elif signal.kind is CrashKind.FATAL:
            self._declare(self._current_exception() or signal.text, at, events, decided=(no, line.raw))
        else:
            # A marker right after a finished traceback explains itself (`Rank 0 scheduler is dead`); a
            # marker that opens a traceback (`Scheduler hit an exception: Traceback`) waits for its end.
            explained = self._traceback_no != no and self._current_exception()
            if explained:
                self._declare(explained, at, events, decided=self._exception_line)
                return
            if self._pending is None:
                self._pending, self._pending_since, self._pending_line = signal, at, (no, line.raw)
            elif signal.weight > self._pending.weight:
                self._pending, self._pending_line = signal, (no, line.raw)

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

    def _declare(
        self,
        reason: str,
        at: float,
        events: list[StartupEvent],
        exit_code: int | None = None,
        decided: tuple[int, str] | None = None,
    ) -> None:
        if self._terminal is not None:
            return
        self._crash = CrashInfo(reason=reason, excerpt=self._excerpt())
        self._terminal = Phase.CRASHED
        self._pending = None
        self._unresolved = None
        if decided is not None:
            self._decision = Decision(Outcome.CRASHED, decided[0], decided[1])
        else:
            how = "unknown" if exit_code is None else str(exit_code)
            self._decision = Decision(
                Outcome.CRASHED, None, reason if exit_code is None else f"exit code {how}: {reason}"
            )
        events.append(Crashed(self._crash, at, self._phase, exit_code))
