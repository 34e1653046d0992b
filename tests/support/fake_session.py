"""A scripted in-memory `Session` for UI tests: emits the events it is given and records every action.

A test double for the dashboard only; the real session is exercised over the embedded SSH server elsewhere.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence

from specdash.bench.sweep import SweepResult
from specdash.core.eta import SweepEstimate, sweep_estimate, tune_estimate
from specdash.core.events import ModeInfo, ModesChanged, ServerStatus, SessionEvent, TuneEntry
from specdash.core.status_text import sweep_plan
from specdash.core.tune import tune_refusal
from specdash.errors import SpecdashError
from specdash.phases import Phase
from specdash.remote.events import ConnectionEvent
from specdash.server.adopt import Adoptable
from specdash.server.session import Listener

Event = SessionEvent | ConnectionEvent

DEMO_MODES = ModesChanged(
    modes=(
        ModeInfo("baseline", "sglang", "Llama-3.1-8B, no speculation"),
        ModeInfo("eagle3", "sglang", "EAGLE-3 draft, 3 steps"),
        ModeInfo("vllm-eagle", "vllm", "vLLM EAGLE, 4 tokens"),
    ),
)


class FakeSession:
    """Implements `specdash.server.session.Session` with no I/O."""

    def __init__(self, events: Iterable[Event] = (), *, label: str = "root@gpu-box") -> None:
        self._label = label
        self._initial = list(events)
        self._listeners: list[Listener] = []
        self._closed = asyncio.Event()
        self.calls: list[tuple[str, tuple[object, ...]]] = []
        """Every action, in order: ("start", ("eagle3",)), ("stop", ()), ..."""
        self.live = False
        self.sweeping = False
        self.adoptable: Adoptable | None = None
        """What `find_adoptable` answers."""
        self.fail_with: SpecdashError | None = None
        """Raise this from the next action (then clear it)."""
        self.tunes: tuple[TuneEntry, ...] = ()
        """What the tunes' `entries` answers (`FakeTunes`)."""
        self.tuning = asyncio.Event()
        """Set while `FakeTunes.run` runs; it returns when `finish_tune` is set (or it is cancelled)."""
        self.finish_tune = asyncio.Event()
        self.tune_name = ""
        """The entry `tune()` runs (what `refusal` names)."""
        self.status = ServerStatus(Phase.STOPPED)
        """The last status emitted."""
        self.ready_s: dict[str, tuple[float, ...]] = {}
        """Each mode's recorded starts to ready (what `sweep_estimate` reads as the store's history)."""
        self.level_s: float | None = None
        """The sweep's level duration (None: request-count levels)."""

    @property
    def label(self) -> str:
        return self._label

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)
        for event in self._initial:
            self._dispatch(listener, event)

    def emit(self, *events: Event) -> None:
        """Send events to every subscriber, as the real session would."""
        for event in events:
            for listener in self._listeners:
                self._dispatch(listener, event)

    def _dispatch(self, listener: Listener, event: Event) -> None:
        if isinstance(event, ServerStatus):
            self.status = event
            self.live = event.phase not in (Phase.STOPPED, Phase.CRASHED, Phase.EXITED)
        listener(event)

    async def run(self) -> None:
        await self._closed.wait()

    def server_live(self) -> bool:
        return self.live

    def sweep_running(self) -> bool:
        return self.sweeping

    async def _record(self, name: str, *args: object) -> None:
        self.calls.append((name, args))
        if self.fail_with is not None:
            error, self.fail_with = self.fail_with, None
            raise error

    async def start(self, mode: str) -> None:
        await self._record("start", mode)

    async def stop(self) -> None:
        await self._record("stop")

    async def find_adoptable(self, *, pid: int | None = None, port: int | None = None, log: str = "") -> Adoptable:
        await self._record("find_adoptable", pid, port, log)
        if self.adoptable is None:
            raise SpecdashError(f"no process {pid}")
        return self.adoptable

    async def adopt(self, target: Adoptable) -> None:
        await self._record("adopt", target.found.pid)

    async def restart(self) -> None:
        await self._record("restart")

    async def switch(self, mode: str) -> None:
        await self._record("switch", mode)

    async def sweep(
        self, modes: Sequence[str], levels: Sequence[int], *, reference: str | None = None
    ) -> Mapping[str, SweepResult]:
        await self._record("sweep", tuple(modes), tuple(levels), *((reference,) if reference else ()))
        return {}

    async def cancel_sweep(self) -> None:
        await self._record("cancel_sweep")

    async def check_greedy(self, reference: str) -> None:
        await self._record("check_greedy", reference)

    def sweep_estimate(self, modes: Sequence[str], levels: Sequence[int]) -> SweepEstimate:
        starts = [step.mode for step in sweep_plan(self.status, modes) if step.action != "measure"]
        return sweep_estimate([(m, self.ready_s.get(m, ())) for m in starts], len(levels) * len(modes), self.level_s)

    def tune_running(self) -> bool:
        return self.tuning.is_set()

    def refusal(self, action: str) -> str | None:
        return tune_refusal(self.tune_name, action) if self.tune_running() else None

    async def close(self) -> None:
        self.calls.append(("close", ()))
        self._closed.set()


class FakeTunes:
    """Implements `specdash.tune.job.Tunes` on a `FakeSession`: records `tune` and `cancel_tune` in its calls."""

    def __init__(self, session: FakeSession) -> None:
        self.session = session

    def entries(self) -> tuple[TuneEntry, ...]:
        return self.session.tunes

    def estimate(self, entry: TuneEntry) -> SweepEstimate:
        return tune_estimate(entry, lambda mode: self.session.ready_s.get(mode, ()), self.session.level_s, 3.0)

    async def run(self, name: str, emit: Callable[[SessionEvent], None]) -> None:
        session = self.session
        await session._record("tune", name)  # noqa: SLF001 - the fake's own log of calls
        session.tune_name = name
        session.tuning.set()
        try:
            await session.finish_tune.wait()
        finally:
            session.tuning.clear()

    async def cancel(self) -> None:
        await self.session._record("cancel_tune")  # noqa: SLF001
        self.session.finish_tune.set()
