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
(about 4 a second), and `Notice`s on ready and crash. `on_ready` gets the timeline when the server is seen
ready; the session records it as a startup (with per-phase durations, for the ETA) only when the watch
began at the launch (`Origin.LAUNCHED`), else as an attach or an adoption.

Who ended the run decides how it ended: an exit after `mark_stopping()` (specdash asked for it) is
`stopped`, whatever the log says while the engine is torn down (vLLM prints an `EngineDeadError`
traceback on a SIGTERM); an exit specdash did not ask for is a crash, whatever the exit code (a vLLM API
server whose EngineCore was killed answers 500 and exits 0). After a crash the run's process group is
listed, so what it left behind (a worker holding memory) can be shown and cleaned up.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx

from specdash.core.eta import Estimate, estimate
from specdash.core.events import LogBatch, Notice, ServerLoad, ServerStatus, SessionEvent
from specdash.core.startup import StartupTracker
from specdash.core.startup_events import ClassifiedLine, Crashed, Exited, MetricsSeen, Ready, StartupEvent, Stuck
from specdash.core.stuck import StuckPolicy, stuck_limits
from specdash.core.timeline import Outcome, Timeline
from specdash.engines.metrics import BatchStats, EngineStats, SpecDecodeStats
from specdash.engines.registry import make_rules
from specdash.errors import SpecdashError
from specdash.phases import CrashInfo, Origin, Phase, Progress
from specdash.remote.ssh import SSHHost
from specdash.remote.ssherror import SSHError
from specdash.server.lifecycle import RunRecord, run_script
from specdash.server.logfollow import RETRY_S, LogFollower

LOG_FLUSH_S = 0.25
"""Log lines reach viewers in batches this far apart (about 4 frames a second)."""
LOG_FLUSH_CHARS = 4 * 1024 * 1024
"""...or sooner, once a batch holds this much text: a line of many megabytes without a break arrives in pieces
within one interval, and a batch must not hold all of it."""
HEALTH_EVERY_S = 1.0
"""Health poll interval while the server starts."""
HEALTH_DEADLINE_S = 5.0
"""One `/health` answer, head and body, within this (a server that trickles bytes fails that poll)."""
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
    crash: CrashInfo | None = None
    """Why the run counts as crashed when the tracker did not say so (an exit nobody asked for)."""
    leftovers: tuple[str, ...] = ()
    """After a crash: the run's process group members still alive ("PID ARGS")."""


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
        origin: How specdash came to watch this run (launched it, attached to it, adopted it).
        members: Lists the run's process group members; called after a crash for what it left behind.
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
        origin: Origin = Origin.LAUNCHED,
        members: Callable[[RunRecord], Awaitable[list[str]]] | None = None,
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
        self.origin = origin
        self.members = members
        self.tracker = StartupTracker(
            record.engine, started_at=record.started_at, stuck_limits=stuck_limits(self.history, stuck)
        )
        self._order = make_rules(record.engine).startup_order
        self.timeline = Timeline(engine=record.engine, start=record.started_at)
        self.state = WatchState()
        offset = max(0, record.log_size - ATTACH_TAIL_BYTES) if record.log_size > ATTACH_TAIL_BYTES else 0
        if origin is Origin.ADOPTED:
            offset = 0  # the whole story of a server started by hand is in its log: read it from the start
        self.follower = LogFollower(host, record.log_path, offset)
        self._pending_lines: list[ClassifiedLine] = []
        self._pending_chars = 0
        self._log_advanced = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.done = asyncio.Event()
        """Set when the run ended (crashed, exited or stopped)."""
        self._load_at = float("-inf")
        self._accept: float | None = None

    # -- public -----------------------------------------------------------------------------------------

    @property
    def phase(self) -> Phase:
        """The run's phase now: a stop we asked for is stopping, then stopped, whatever the log says; an exit
        we did not ask for is a crash."""
        if self.state.stopping:
            return Phase.STOPPED if self.state.exited else Phase.STOPPING
        if self.state.exited or self.state.crash is not None:
            return Phase.CRASHED
        return self.tracker.phase

    @property
    def crash(self) -> CrashInfo | None:
        """Why the run crashed (None unless `phase` is CRASHED)."""
        if self.phase is not Phase.CRASHED:
            return None
        return self.tracker.crash or self.state.crash

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
            if self.phase is Phase.CRASHED and self.members is not None:
                with contextlib.suppress(SSHError, SpecdashError):
                    self.state.leftovers = tuple(await self.members(self.record))
                    if self.state.leftovers:
                        self._publish()
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
            self._pending_chars += sum(len(line.text) for line in classified)
            self._handle(events)
            self._log_advanced.set()
            if self._pending_chars > LOG_FLUSH_CHARS:
                self._flush()
            # A turn for everything else after each piece (at most 64 KB): a flood leaves piece after piece
            # ready, and reading them all in one turn kept a key press waiting for seconds on a busy machine.
            # What waits meanwhile is bounded by the SSH channel's window (`SSHHost.stream_bytes`).
            await asyncio.sleep(0)

    async def _flush_log(self) -> None:
        while True:
            await asyncio.sleep(LOG_FLUSH_S)
            self._flush()

    def _flush(self) -> None:
        if self._pending_lines:
            batch, self._pending_lines, self._pending_chars = tuple(self._pending_lines), [], 0
            self.emit(LogBatch(batch))

    async def _liveness(self) -> None:
        while True:
            await self.host.wait_connected()
            try:
                result = await run_script(self.host, "status.sh", self.record.id, state_dir=self.state_dir)
                said = {word for word, _ in result.lines}
                # No record on the host ("none": a run dir removed, or a process watched without one) says
                # nothing about the process itself: then its PID decides, below.
                if said & {"dead", "stopped", "badrecord"}:
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
            if self.tracker.crash is None:
                # The log read as a clean stop or as serving, but nobody here asked the server to stop.
                self.state.crash = CrashInfo(
                    f"the server exited without a stop from specdash (last phase: {self.tracker.phase.value})"
                )
                self.emit(Notice(f"{self.record.mode} crashed: {self.state.crash.reason}", "error", bell=True))
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
        async with httpx.AsyncClient(timeout=httpx.Timeout(HEALTH_DEADLINE_S), trust_env=False) as client:
            while self.tracker.phase not in (Phase.READY, Phase.CRASHED, Phase.EXITED) and not self.state.exited:
                try:
                    await self.host.wait_connected()
                    # The same local port on every call, across reconnects (`SSHHost.forward`): asking is cheap.
                    local_port = await self.host.forward(self.record.port, self.record.server_host or "127.0.0.1")
                    status: int | None
                    try:
                        # A deadline for the whole answer (httpx's is per read: a trickle never trips it).
                        async with asyncio.timeout(HEALTH_DEADLINE_S):
                            response = await client.get(f"http://127.0.0.1:{local_port}/health")
                        status = response.status_code
                    except (httpx.TransportError, TimeoutError):
                        status = None  # refused (through the forward: closed without a response), or too slow
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
                self._load(event)
                continue  # periodic throughput lines change nothing the status shows
            changed = True
            if isinstance(event, Ready):
                self.emit(Notice(f"{self.record.mode} is ready on {self.label}", bell=True))
                if self.on_ready is not None and self.timeline.outcome is Outcome.READY:
                    self.on_ready(self.timeline)
            elif isinstance(event, Crashed):
                if self.state.stopping:
                    continue  # a stop we asked for tears the engine down: its tracebacks are no crash
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

    def _load(self, seen: MetricsSeen) -> None:
        """Rank 0's batch or engine stats as a `ServerLoad`, at most one a second (the fleet view's numbers)."""
        m = seen.metrics
        if any(ch.isdigit() and ch != "0" for ch in seen.rank):
            return  # another rank's copy of the batch line (with TP > 1 only rank 0's describes the batch)
        if isinstance(m, BatchStats) and m.kind == "decode":
            load = ServerLoad(m.gen_throughput, m.running_reqs, m.accept_len, seen.at)
        elif isinstance(m, EngineStats):
            load = ServerLoad(m.gen_throughput, m.running_reqs, self._accept, seen.at)
        elif isinstance(m, SpecDecodeStats):
            self._accept = m.mean_acceptance_length
            return
        else:
            return
        if seen.at - self._load_at >= 1.0:
            self._load_at = seen.at
            self.emit(load)

    def status(self) -> ServerStatus:
        """The snapshot viewers show."""
        phase = self.phase
        spans = self.timeline.spans
        current = spans[-1] if spans and spans[-1].end is None else None
        # Before the first phase line the launch itself is the phase: the ETA counts from the first second.
        phase_start = current.start if current else (self.record.started_at if not spans else None)
        eta = None
        if phase.is_startup and phase_start is not None:
            eta = self.eta(phase, phase_start, self.tracker.progress)
        return ServerStatus(
            phase=phase,
            mode=self.record.mode,
            engine=self.record.engine,
            pid=self.record.pid,
            port=self.record.port,
            started_at=self.record.started_at,
            phase_started_at=phase_start,
            progress=self.tracker.progress if phase.is_startup else None,
            timeline=tuple((s.phase, s.duration) for s in spans if s.duration is not None),
            eta_remaining=eta.remaining if eta else None,
            eta_samples=eta.samples if eta else len(self.history),
            eta_spread=eta.spread if eta else None,
            crash=self.crash,
            note=self.state.note,
            origin=self.origin,
            leftovers=self.state.leftovers if phase is Phase.CRASHED else (),
            command=self.record.command,
        )

    def eta(self, phase: Phase, since: float, progress: Progress | None) -> Estimate | None:
        """The ETA of a server in `phase` since `since`, from the host's history and the phases before it that
        this start has finished (a Slurm job asks it for its slowest rank's phase)."""
        order = self._order

        def before(p: Phase) -> bool:
            return p not in order or phase not in order or order.index(p) < order.index(phase)

        finished = {s.phase: s.duration for s in self.timeline.spans if s.duration is not None and before(s.phase)}
        return estimate(
            self.history,
            finished,
            phase,
            max(0.0, self.clock() - since),
            progress.fraction if progress and progress.total else None,
            order,
        )

    def _publish(self) -> None:
        self.emit(self.status())


def _wait_exit_command(pid: int) -> str:
    """A command line that prints `exited` once `pid` is gone or a zombie, and ends (a stream, not a poll)."""
    return (
        f'while st=$(ps -o stat= -p {pid} 2>/dev/null); [ -n "$st" ] && [ "${{st#Z}}" = "$st" ]; '
        f'do sleep 0.2; done; echo "exited $(date +%s.%N)"'
    )
