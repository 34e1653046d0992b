"""The contract between a viewer (the dashboard, the headless CLI) and what it controls.

`Session` is implemented by `specdash.server.remote_session.RemoteSession` (one SSH host). Viewers
subscribe a callback, run `session.run()` in a long-lived task, and call the actions from key bindings;
every action is an async method that returns when the action is done (or raises `SpecdashError`, whose
message the viewer shows). The session never touches widgets.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from specdash.bench.sweep import SweepResult
from specdash.core.eta import SweepEstimate
from specdash.core.events import SessionEvent
from specdash.remote.events import ConnectionEvent
from specdash.server.adopt import Adoptable

Listener = Callable[[SessionEvent | ConnectionEvent], None]
"""Called on the session's event loop for every event, in order."""


class Session(Protocol):
    """A host with its server and bench, as one controllable thing."""

    @property
    def label(self) -> str:
        """How to name the host in the header (`root@gpu-box`)."""
        ...

    def subscribe(self, listener: Listener) -> None:
        """Receive every event from now on (ModesChanged and the current ServerStatus are replayed)."""
        ...

    async def run(self) -> None:
        """Connect, attach to a live run if there is one, and watch until `close()`."""
        ...

    def server_live(self) -> bool:
        """True while a server of ours runs (or starts) on the host."""
        ...

    def sweep_running(self) -> bool:
        """True while a sweep runs."""
        ...

    async def start(self, mode: str) -> None:
        """Start `mode` (refused when a server is live or its port is busy)."""
        ...

    async def stop(self) -> None:
        """Stop the live server: SIGTERM the group, SIGKILL after the grace period."""
        ...

    async def find_adoptable(self, *, pid: int | None = None, port: int | None = None, log: str = "") -> Adoptable:
        """Describe a server process specdash did not start (by PID or port), and whether it can adopt it."""
        ...

    async def adopt(self, target: Adoptable) -> None:
        """Adopt a server started by hand: watch it, bench it, stop it (after a confirmation) like our own."""
        ...

    async def restart(self) -> None:
        """Stop, then start the same mode."""
        ...

    async def switch(self, mode: str) -> object:
        """Make `mode` live: the live server stops (or sleeps, for a resident mode), then `mode` starts (or a
        sleeping server of it wakes, verified). What it returns (how the switch went) is for the caller."""
        ...

    async def sweep(
        self, modes: Sequence[str], levels: Sequence[int], *, reference: str | None = None
    ) -> Mapping[str, SweepResult]:
        """Run a concurrency sweep on the live server (one mode) or an A/B across `modes` (restarting
        the server between them), in that order; returns what it measured (the result per mode) when the
        sweep ends. `reference` (default: the first of `modes`) is the mode the others are compared with,
        whatever the order."""
        ...

    async def cancel_sweep(self) -> None:
        """Stop the running sweep; finished levels are kept."""
        ...

    async def check_greedy(self, reference: str) -> None:
        """The greedy spot check: the live mode's outputs at temperature 0 for N prompts, compared with
        `reference`'s stored outputs for the same prompts; reported as `GreedyUpdate` events."""
        ...

    def sweep_estimate(self, modes: Sequence[str], levels: Sequence[int]) -> SweepEstimate:
        """How long a sweep of `modes` over `levels` should take from the state now (`core.eta`): the starts
        it makes (`core.status_text.sweep_plan`) from the host's startup history, and the levels' length."""
        ...

    def tune_running(self) -> bool:
        """True while a tune (`specdash.tune`) holds the session's claim on the server."""
        ...

    def refusal(self, action: str) -> str | None:
        """Why the viewer's `action` (`start`, `stop`, `restart`, `switch`, `adopt`, `sweep`, `ab`,
        `cancel_sweep`, `greedy`) is refused now, in a sentence that says the way out; None when it may run.
        While a tune runs it owns the server (`core.tune.TUNE_OWNS`), and the session's own methods refuse
        these calls with the same sentence."""
        ...

    async def close(self) -> None:
        """Stop watching and close the connection (the server keeps running)."""
        ...
