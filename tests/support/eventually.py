"""Wait for a condition with a deadline: the test suite's one poll loop.

Tests wait on events where there is one (an `asyncio.Event`, a line in a process's output, a worker's end).
What is left is state outside the test's loop: a remote process, `/proc`, a file another process writes, a tmux
pane. `eventually` polls it until a deadline and, on timeout, fails with what was awaited and the last value
seen, so a failure says where things stood. Deadlines are generous: a loaded machine must not fail them, and
a condition that holds ends the wait at once.

    await eventually(lambda: proc.group_pids(), until=lambda pids: not pids, timeout=10, what="no survivors")
    words = await eventually(children_of_launcher, until=lambda w: len(w) >= 3, timeout=10, what="3 children")
    screen = eventually_sync(term.screen, until=lambda s: "READY" in s, timeout=30, what="READY on screen")

`probe` returns the observed value (for the async version it may also return an awaitable, e.g. a remote
command); `until` judges it (truthiness by default); the value that passed is returned. A probe may raise to
end the wait early (a process that died cannot become ready).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")

INTERVAL = 0.05
"""Seconds between two probes: short next to any deadline, long enough not to load the machine."""


def _failure(what: str, timeout: float, value: object) -> AssertionError:
    shown = value if isinstance(value, str) and "\n" in value else repr(value)
    return AssertionError(f"{what}: not within {timeout:g} s; last seen:\n{shown}")


@overload
async def eventually(
    probe: Callable[[], Awaitable[T]],
    *,
    timeout: float,
    what: str,
    until: Callable[[T], object] = ...,
    interval: float = ...,
) -> T: ...


@overload
async def eventually(
    probe: Callable[[], T],
    *,
    timeout: float,
    what: str,
    until: Callable[[T], object] = ...,
    interval: float = ...,
) -> T: ...


async def eventually(
    probe: Callable[[], Any],
    *,
    timeout: float,
    what: str,
    until: Callable[[Any], object] = bool,
    interval: float = INTERVAL,
) -> Any:
    """Probe until `until(value)` holds and return that value; fail after `timeout` seconds (see the module)."""
    deadline = time.monotonic() + timeout
    while True:
        value: Any = probe()
        if inspect.isawaitable(value):
            value = await value
        if until(value):
            return value
        if time.monotonic() >= deadline:
            raise _failure(what, timeout, value)
        await asyncio.sleep(interval)


def eventually_sync(
    probe: Callable[[], T],
    *,
    timeout: float,
    what: str,
    until: Callable[[T], object] = bool,
    interval: float = INTERVAL,
) -> T:
    """`eventually` for code without an event loop (subprocesses, tmux panes)."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if until(value):
            return value
        if time.monotonic() >= deadline:
            raise _failure(what, timeout, value)
        time.sleep(interval)
