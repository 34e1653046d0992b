"""Probe worker processes: the probe runs off the caller's event loop (the UI's, or the CLI's).

Each worker is a `spawn`ed process with its own event loop (uvloop when installed) and one long-lived
`Probe` (one `http1` connection pool) for the whole sweep. The parent sends commands over a `multiprocessing`
pipe and receives typed messages back (frozen dataclasses, pickled by the pipe):

| parent -> worker (`Command`) | worker -> parent (`Report`) |
|---|---|
| `RunLevel(plan)` | `Ready(worker)` once the connection pool is open |
| `Abort(reason)` (stop sending) | `SampleDone(sample)` per finished request |
| `Stop()` (exit) | `Tick(arrivals, inflight, now_ns)` every `tick_s` |
| | `LevelDone(outcome)` at the end of the level; `Exited()` when the pipe closed |

The parent hands samples and ticks to a `LevelSink` (`sample(worker, s)`, `tick(worker, ...)`); the
in-process runner of `specdash.bench.sweep` calls the same sink directly, with no message in between.

How many processes (a simple rule): `ceil(C / streams_per_process)` (64 streams per process by default:
64 streams at ~100 chunks/s each is ~6,400 events/s, about 15 % of a core at ≤ 25 µs/event), at most
`max_processes` (default: the number of CPUs). If a level finds a worker client-limited (`Headroom`),
the sweep doubles the process count for the next level, within the same cap.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import multiprocessing as mp
import os
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Protocol

from specdash.bench.probe import LevelOutcome, LevelPlan, Probe, ProbeSettings, install_uvloop
from specdash.bench.samples import RequestSample
from specdash.errors import SpecdashError


@dataclass(frozen=True)
class RunLevel:
    """Run this share of a level."""

    plan: LevelPlan


@dataclass(frozen=True)
class Abort:
    """Send no more requests in the current level (in-flight ones finish)."""

    reason: str


@dataclass(frozen=True)
class Stop:
    """Stop sending and exit."""

    reason: str = "stopped"


Command = RunLevel | Abort | Stop
"""Parent -> worker."""


@dataclass(frozen=True)
class Ready:
    """The worker's connection pool is open."""

    worker: int


@dataclass(frozen=True)
class SampleDone:
    """A request finished or failed."""

    sample: RequestSample


@dataclass(frozen=True)
class Tick:
    """Live token credits (arrival ns, tokens) since the last tick, and the in-flight count."""

    arrivals: list[tuple[int, int]]
    inflight: int
    now_ns: int


@dataclass(frozen=True)
class LevelDone:
    """The worker's share of the level ended."""

    outcome: LevelOutcome


@dataclass(frozen=True)
class Exited:
    """The pipe closed: the worker is gone (said by the parent's reader, never sent)."""


Report = Ready | SampleDone | Tick | LevelDone | Exited
"""Worker -> parent."""


class LevelSink(Protocol):
    """Where the parent puts what the probes report during a level (`worker` is the probe's number)."""

    def sample(self, worker: int, sample: RequestSample) -> None:
        """A request finished or failed."""

    def tick(self, worker: int, arrivals: list[tuple[int, int]], inflight: int, now_ns: int) -> None:
        """Live credits and the in-flight count of one probe."""

    def gauges(self, values: dict[str, float]) -> None:
        """The server's gauges (`gauges.POLL_NAMES`), read next to it by a probe on the host."""


def processes_for(concurrency: int, streams_per_process: int = 64, max_processes: int | None = None) -> int:
    """How many probe processes a level of `concurrency` streams gets (see the module docstring)."""
    cap = max_processes if max_processes is not None else (os.cpu_count() or 1)
    return max(1, min(max(1, cap), math.ceil(concurrency / max(1, streams_per_process))))


def split_level(concurrency: int, processes: int, total_requests: int | None, **plan: Any) -> list[LevelPlan]:
    """Share one level between processes: streams as evenly as possible, request indices interleaved.

    Process w sends indices w, w + P, w + 2P, ... so the global request order (and therefore the prompt
    order) is the same whatever the process count.
    """
    procs = max(1, min(processes, concurrency))
    plans = []
    for w in range(procs):
        streams = concurrency // procs + (1 if w < concurrency % procs else 0)
        plans.append(
            LevelPlan(concurrency=streams, first_index=w, index_step=procs, total_requests=total_requests, **plan)
        )
    return plans


class _PipeSink:
    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def sample(self, sample: RequestSample) -> None:
        self._conn.send(SampleDone(sample))

    def tick(self, arrivals: list[tuple[int, int]], inflight: int, now_ns: int) -> None:
        self._conn.send(Tick(arrivals, inflight, now_ns))


def worker_main(
    conn: Connection, base_url: str, settings: ProbeSettings, prompts: tuple[str, ...], worker: int
) -> None:
    """Entry point of a probe process (must stay importable at module level for `spawn`)."""
    _quiet_stdio()
    install_uvloop()
    try:
        asyncio.run(_serve(conn, base_url, settings, prompts, worker))
    except (EOFError, BrokenPipeError, KeyboardInterrupt):
        pass  # the parent went away; nothing to report to


def _quiet_stdio() -> None:
    """Point the worker's fds 1 and 2 at /dev/null: it inherits the terminal, and under the dashboard anything
    it printed would land on top of the screen. Its failures reach the parent as messages instead."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)


@contextlib.contextmanager
def _real_stdio() -> Iterator[None]:
    """`spawn` passes the parent's stdout/stderr file descriptors on; under Textual they are replaced by
    objects without one ("bad value(s) in fds_to_keep"). Lend real files for the duration of `start()`."""
    if _has_fd(sys.stdout) and _has_fd(sys.stderr):
        yield
        return
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        yield


def _has_fd(stream: object) -> bool:
    try:
        return isinstance(stream.fileno(), int) and stream.fileno() >= 0  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return False


def _reader_thread(conn: Connection, loop: asyncio.AbstractEventLoop, deliver: Callable[[Any], None]) -> None:
    """Blocking reads in a thread: `loop.add_reader` would make the pipe non-blocking for our writes too."""

    def run() -> None:
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                msg = Exited()
            try:
                loop.call_soon_threadsafe(deliver, msg)
            except RuntimeError:
                return  # the loop is closed
            if isinstance(msg, Exited):
                return

    threading.Thread(target=run, name="specdash-pipe-reader", daemon=True).start()


async def _serve(
    conn: Connection, base_url: str, settings: ProbeSettings, prompts: tuple[str, ...], worker: int
) -> None:
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[Command] = asyncio.Queue()

    def deliver(msg: Command | Exited) -> None:
        inbox.put_nowait(Stop("the parent went away") if isinstance(msg, Exited) else msg)

    _reader_thread(conn, loop, deliver)
    sink = _PipeSink(conn)
    async with Probe(base_url, settings, prompts, worker) as probe:
        conn.send(Ready(worker))
        while True:
            msg = await inbox.get()
            if isinstance(msg, Stop):
                return
            if not isinstance(msg, RunLevel):
                continue
            run = asyncio.create_task(probe.run_level(msg.plan, sink))
            while not run.done():
                getter = asyncio.create_task(inbox.get())
                await asyncio.wait({run, getter}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    cmd = getter.result()
                    if isinstance(cmd, Abort | Stop):
                        probe.stop(cmd.reason)
                    if isinstance(cmd, Stop):
                        inbox.put_nowait(cmd)
                else:
                    getter.cancel()
            conn.send(LevelDone(run.result()))


@dataclass(frozen=True)
class _SinkFailed:
    """The level's sink raised on a sample or a tick (delivered on the loop, re-raised by `run_level`)."""

    error: Exception


@dataclass
class _Worker:
    process: Any
    conn: Connection
    ready: bool = False


class ProbePool:
    """Parent side: starts probe processes on demand and runs levels across them."""

    def __init__(self, base_url: str, settings: ProbeSettings, prompts: tuple[str, ...]) -> None:
        """Prepare a pool; processes start in `ensure`.

        Args:
            base_url: The server's base URL.
            settings: Request shape and timeouts.
            prompts: The prompt set, in order.
        """
        self.base_url = base_url
        self.settings = settings
        self.prompts = prompts
        self._ctx = mp.get_context("spawn")
        self._workers: list[_Worker] = []
        self._queue: asyncio.Queue[tuple[int, Report | _SinkFailed]] = asyncio.Queue()
        self._sink: LevelSink | None = None
        """The running level's sink: samples and ticks go to it as they are read, not through the queue."""

    @property
    def size(self) -> int:
        """Processes started so far."""
        return len(self._workers)

    async def ensure(self, n: int, timeout_s: float = 60.0) -> None:
        """Start processes until there are `n`, and wait until each has its session open."""
        loop = asyncio.get_running_loop()
        while len(self._workers) < n:
            wid = len(self._workers)
            parent, child = self._ctx.Pipe(duplex=True)
            proc = self._ctx.Process(
                target=worker_main,
                args=(child, self.base_url, self.settings, self.prompts, wid),
                name=f"specdash-probe-{wid}",
                daemon=True,
            )
            with _real_stdio():
                proc.start()
            child.close()
            self._workers.append(_Worker(proc, parent))
            _reader_thread(parent, loop, functools.partial(self._deliver, wid))
        try:
            async with asyncio.timeout(timeout_s):
                while not all(w.ready for w in self._workers):
                    wid, msg = await self._queue.get()
                    if isinstance(msg, Ready):
                        self._workers[wid].ready = True
                    elif isinstance(msg, Exited):
                        raise SpecdashError(f"probe process {wid} exited during start-up")
        except TimeoutError as exc:
            raise SpecdashError(f"probe processes not ready after {timeout_s:g} s") from exc

    def _deliver(self, wid: int, msg: Report) -> None:
        # On the loop (the reader thread hands each message over with call_soon_threadsafe): the level's data
        # goes to its sink at once, one hop less than through the queue; the queue keeps the control messages,
        # in order after the data sent before them.
        sink = self._sink
        if sink is None or not isinstance(msg, SampleDone | Tick):
            self._queue.put_nowait((wid, msg))
            return
        try:
            if isinstance(msg, SampleDone):
                sink.sample(wid, msg.sample)
            else:
                sink.tick(wid, msg.arrivals, msg.inflight, msg.now_ns)
        except Exception as exc:  # raised where the level is awaited, as a failing sink always was
            self._queue.put_nowait((wid, _SinkFailed(exc)))

    def abort(self, reason: str) -> None:
        """Ask every worker to stop sending new requests in the current level."""
        for w in self._workers:
            try:
                w.conn.send(Abort(reason))
            except OSError:
                pass

    async def run_level(self, plans: list[LevelPlan], sink: LevelSink) -> list[LevelOutcome | None]:
        """Run `plans[i]` on worker i; hand every sample and tick to `sink`; return each outcome.

        A worker that dies mid-level yields None as its outcome instead of hanging the level.
        """
        await self.ensure(len(plans))
        for w, plan in zip(self._workers, plans, strict=False):
            w.conn.send(RunLevel(plan))
        outcomes: list[LevelOutcome | None] = [None] * len(plans)
        pending = set(range(len(plans)))
        self._sink = sink
        try:
            while pending:
                wid, msg = await self._queue.get()
                match msg:
                    case LevelDone(outcome):
                        outcomes[wid] = outcome
                        pending.discard(wid)
                    case Exited():
                        pending.discard(wid)
                    case _SinkFailed(error):
                        raise error
        finally:
            self._sink = None
        return outcomes

    async def close(self, timeout_s: float = 5.0) -> None:
        """Stop every worker: ask politely, then terminate and kill what is left."""
        loop = asyncio.get_running_loop()
        for w in self._workers:
            try:
                w.conn.send(Stop())
            except OSError:
                pass
        deadline = loop.time() + timeout_s
        for w in self._workers:
            # Joins run in a thread: this loop may be the UI's, and a blocking join would freeze it.
            await loop.run_in_executor(None, w.process.join, max(0.0, deadline - loop.time()))
            if w.process.is_alive():
                w.process.terminate()
                await loop.run_in_executor(None, w.process.join, 1.0)
            if w.process.is_alive():
                w.process.kill()
                await loop.run_in_executor(None, w.process.join, 1.0)
            w.conn.close()
        self._workers.clear()
