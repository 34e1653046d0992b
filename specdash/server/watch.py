"""One run, watched: the log stream, process liveness and health merged into one state machine.

Three sources feed one `StartupTracker`:

- the server log, followed from its byte offset (`LogFollower`), so a reconnect neither loses nor repeats
  a line;
- liveness: a self-ending remote loop that prints once the main process is gone; before telling the
  tracker, the watcher reads the log until its offset reaches the file's size taken after the exit (not
  "while it advances": under load the follower may pause for seconds), so the crash reason comes from the
  traceback rather than from "process exited";
- health, polled through the SSH port forward once a second **only until ready**: on SGLang each
  `/health` is a generation, so polling during a benchmark would distort it.

Viewers get `ServerStatus` snapshots (on every change and once a second while starting), `LogBatch`es
(about 4 a second), and `Notice`s on ready and crash. A completed startup is recorded in the local store
with its per-phase durations; the ETA of the next start of the same host and mode comes from those.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from specdash.core.eta import estimate
from specdash.core.events import LogBatch, Notice, ServerStatus, SessionEvent
from specdash.core.models import Phase
from specdash.core.startup import StartupTracker
from specdash.core.startup_events import ClassifiedLine, Crashed, Exited, MetricsSeen, Ready, StartupEvent, Stuck
from specdash.core.stuck import StuckPolicy, stuck_limits
from specdash.core.timeline import Outcome, Timeline
from specdash.engines.registry import make_rules
from specdash.remote.ssh import SSHHost
from specdash.remote.ssherror import SSHError
from specdash.server.lifecycle import RunRecord, run_script
from specdash.server.logfollow import RETRY_S, LogFollower

LOG_FLUSH_S = 0.25
"""Log lines reach viewers in batches this far apart (about 4 frames a second)."""
HEALTH_EVERY_S = 1.0
"""Health poll interval while the server starts."""
CATCH_UP_CAP_S = 600.0
"""After the exit, reading the rest of the log may take this long at most (it ends as soon as it is read)."""
ATTACH_TAIL_BYTES = 8 * 1024 * 1024
"""On attach, a log larger than this is read from its last `ATTACH_TAIL_BYTES` only (health says ready)."""


@dataclass
class WatchState:
    """What the watcher knows beyond the tracker (for status snapshots)."""

    stopping: bool = False
    """A stop was requested by us: the exit that follows is not a crash."""
    exited: bool = False
    """The main process is gone."""
    note: str = ""
    """Extra line for the server panel."""


class ServerWatch:
    """Watches one run until it ends or `stop()` is called.

    Args:
        host: The connected host.
        record: The run (from `Lifecycle.start` or `.current`).
        emit: Receives every event, on the event loop.
        history: Past startups of this host and mode (phase -> seconds), oldest first, for the ETA and the
            stuck limits.
        stuck: The mode's stuck rules (`[modes.NAME.stuck]`), applied over `history`.
        on_ready: Called with the finished startup's timeline when the server becomes ready.
        clock: Wall clock (epoch seconds), injectable for tests.
    """

    def __init__(
        self,
        host: SSHHost,
        record: RunRecord,
        emit: Callable[[SessionEvent], None],
        *,
        history: list[dict[str, float]] | None = None,
        stuck: StuckPolicy | None = None,
        on_ready: Callable[[Timeline], None] | None = None,
        on_event: Callable[[StartupEvent], None] | None = None,
        clock: Callable[[], float] = time.time,
        state_dir: str = "~/.specdash",
        label: str = "",
    ) -> None:
        self.host = host
        self.record = record
        self.emit = emit
        self.history = history or []
        self.on_ready = on_ready
        self.on_event = on_event
        self.clock = clock
        self.state_dir = state_dir
        self.label = label or host.name
        self.tracker = StartupTracker(
            record.engine, started_at=record.started_at, stuck_limits=stuck_limits(self.history, stuck)
        )
        self._order = make_rules(record.engine).startup_order
        self.timeline = Timeline(engine=record.engine, start=record.started_at)
        self.state = WatchState()
        offset = max(0, record.log_size - ATTACH_TAIL_BYTES) if record.log_size > ATTACH_TAIL_BYTES else 0
        self.follower = LogFollower(host, record.log_path, offset)
        self._pending_lines: list[ClassifiedLine] = []
        self._log_advanced = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.done = asyncio.Event()
        """Set when the run ended (crashed, exited or stopped)."""

    # -- public -----------------------------------------------------------------------------------------

    @property
    def phase(self) -> Phase:
        """The run's phase now."""
        if self.state.stopping and not self.state.exited:
            return Phase.STOPPING
        if self.state.exited and self.tracker.phase not in (Phase.CRASHED, Phase.EXITED):
            return Phase.STOPPED if self.state.stopping else Phase.EXITED
        return self.tracker.phase

    async def run(self) -> None:
        """Watch until the run ends. Cancel to stop watching (the server keeps running)."""
        self.emit(LogBatch((), reset=True))
        self._publish()
        self._tasks = [
            asyncio.create_task(self._follow_log(), name="watch-log"),
            asyncio.create_task(self._flush_log(), name="watch-flush"),
            asyncio.create_task(self._liveness(), name="watch-liveness"),
            asyncio.create_task(self._health(), name="watch-health"),
            asyncio.create_task(self._ticks(), name="watch-ticks"),
        ]
        try:
            await self.done.wait()
            # Let the last log lines (after the exit) reach the viewers.
            await asyncio.sleep(LOG_FLUSH_S)
            self._flush()
        finally:
            for task in self._tasks:
                task.cancel()
            for task in self._tasks:
                with contextlib.suppress(asyncio.CancelledError, SSHError):
                    await task

    def mark_stopping(self) -> None:
        """We are about to stop this run: its exit will be reported as stopped, not crashed."""
        self.state.stopping = True
        self._publish()

    # -- sources ----------------------------------------------------------------------------------------

    async def _follow_log(self) -> None:
        async for lines in self.follower.batches():
            events, classified = self.tracker.feed_lines(lines, self.clock())
            self._pending_lines.extend(classified)
            self._handle(events)
            self._log_advanced.set()

    async def _flush_log(self) -> None:
        while True:
            await asyncio.sleep(LOG_FLUSH_S)
            self._flush()

    def _flush(self) -> None:
        if self._pending_lines:
            batch, self._pending_lines = tuple(self._pending_lines), []
            self.emit(LogBatch(tuple(line.text for line in batch), classified=batch))

    async def _liveness(self) -> None:
        while True:
            await self.host.wait_connected()
            try:
                result = await run_script(self.host, "status.sh", self.record.id, state_dir=self.state_dir)
                said = {word for word, _ in result.lines}
                if said & {"dead", "stopped", "badrecord", "none"}:
                    break
                gone = False
                async for line in self.host.stream(_wait_exit_command(self.record.pid)):
                    if line.startswith("exited"):
                        gone = True
                if gone:
                    break
            except SSHError:
                await asyncio.sleep(RETRY_S)  # let the supervisor notice a dead connection
        await self._catch_up_log()
        self.state.exited = True
        now = self.clock()
        if not self.state.stopping:
            self._handle(self.tracker.process_exited(None, now))
        self._publish()
        self.done.set()

    async def _catch_up_log(self, cap: float = CATCH_UP_CAP_S) -> None:
        """Read the log to its end before the exit is reported, so the crash reason is there: until the
        follower's offset reaches the file's size taken now (after the exit), however slowly it gets there
        (a loaded machine or a flood may leave it far behind). `cap` only bounds a follower that can no
        longer read (the file truncated or gone, the link down for good)."""
        with contextlib.suppress(SSHError, ValueError, TimeoutError):
            result = await self.host.run(f"stat -c %s {shlex.quote(self.record.log_path)}", timeout=30.0)
            size = int((result.stdout.strip().splitlines() or ["0"])[-1])  # the last line: after any banner
            async with asyncio.timeout(cap):
                while self.follower.offset < size:
                    self._log_advanced.clear()
                    await self._log_advanced.wait()

    async def _health(self) -> None:
        async with httpx.AsyncClient(timeout=httpx.Timeout(5.0), trust_env=False) as client:
            while self.tracker.phase not in (Phase.READY, Phase.CRASHED, Phase.EXITED) and not self.state.exited:
                try:
                    await self.host.wait_connected()
                    # The same local port on every call, across reconnects (`SSHHost.forward`): asking is cheap.
                    local_port = await self.host.forward(self.record.port)
                    status: int | None
                    try:
                        response = await client.get(f"http://127.0.0.1:{local_port}/health")
                        status = response.status_code
                    except httpx.TransportError:
                        status = None  # refused (through the forward: closed without a response)
                    if not self.state.exited:
                        self._handle(self.tracker.health(status, self.clock()))
                except SSHError:
                    pass  # lost meanwhile: the next round waits for the reconnect
                await asyncio.sleep(HEALTH_EVERY_S)

    async def _ticks(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self._handle(self.tracker.tick(self.clock()))
            if self.tracker.phase not in (Phase.READY, Phase.CRASHED, Phase.EXITED):
                self._publish()  # elapsed and ETA move even when the log is quiet

    # -- events -----------------------------------------------------------------------------------------

    def _handle(self, events: list[StartupEvent]) -> None:
        if not events:
            return
        changed = False
        for event in events:
            self.timeline.apply(event)
            if self.on_event is not None:
                self.on_event(event)
            if isinstance(event, MetricsSeen):
                continue  # periodic throughput lines change nothing the status shows
            changed = True
            if isinstance(event, Ready):
                self.emit(Notice(f"{self.record.mode} is ready on {self.label}", bell=True))
                if self.on_ready is not None and self.timeline.outcome is Outcome.READY:
                    self.on_ready(self.timeline)
            elif isinstance(event, Crashed):
                self.emit(Notice(f"{self.record.mode} crashed: {event.info.reason}", "error", bell=True))
                self.done.set()
            elif isinstance(event, Exited):
                self.done.set()
            elif isinstance(event, Stuck):
                self.state.note = event.reason
                self.emit(Notice(f"{self.record.mode}: {event.reason}", "warning"))
        if changed:
            self._flush()  # viewers see the line that changed the state together with the change
            self._publish()

    def status(self) -> ServerStatus:
        """The snapshot viewers show."""
        now = self.clock()
        phase = self.phase
        spans = self.timeline.spans
        finished = {s.phase: s.duration for s in spans if s.duration is not None}
        current = spans[-1] if spans and spans[-1].end is None else None
        eta = None
        if phase.is_startup and current is not None:
            progress = self.tracker.progress
            eta = estimate(
                self.history,
                {p: d for p, d in finished.items() if d is not None},
                phase,
                max(0.0, now - current.start),
                progress.fraction if progress and progress.total else None,
                self._order,
            )
        crash = self.tracker.crash
        return ServerStatus(
            phase=phase,
            mode=self.record.mode,
            engine=self.record.engine,
            pid=self.record.pid,
            port=self.record.port,
            started_at=self.record.started_at,
            phase_started_at=current.start if current else None,
            progress=self.tracker.progress if phase.is_startup else None,
            timeline=tuple((s.phase, s.duration) for s in spans if s.duration is not None),
            eta_remaining=eta.remaining if eta else None,
            eta_samples=eta.samples if eta else len(self.history),
            crash=crash,
            note=self.state.note,
        )

    def _publish(self) -> None:
        self.emit(self.status())


def _wait_exit_command(pid: int) -> str:
    """A command line that prints `exited` once `pid` is gone or a zombie, and ends (a stream, not a poll)."""
    return (
        f'while st=$(ps -o stat= -p {pid} 2>/dev/null); [ -n "$st" ] && [ "${{st#Z}}" = "$st" ]; '
        f'do sleep 0.2; done; echo "exited $(date +%s.%N)"'
    )
