"""Let a pilot-driven app finish what a key press or an event started, before a test looks at it."""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

from textual.app import App
from textual.pilot import Pilot
from textual.screen import Screen

from specdash.ui.app import SpecdashApp
from tests.support.eventually import eventually

WORKER_GROUPS = ("action", "sweep", "autoplay")
"""The app's worker groups a test waits for (each ends by itself on the fake session)."""


async def settle(app: SpecdashApp) -> None:
    """Let the app's workers finish (those a just-handled message started included), then one more turn.

    A few loop turns first, so that a worker started by a message still in flight exists when we look;
    finished workers leave `app.workers`, and an empty list would wait for all of them, so only pending
    ones are passed.
    """
    for _ in range(5):
        await asyncio.sleep(0)
    pending = [w for w in app.workers if w.group in WORKER_GROUPS]
    if pending:
        await app.workers.wait_for_complete(pending)
    await asyncio.sleep(0)


async def settle_screen(pilot: Pilot[None]) -> None:
    """Let the screen process its messages and finish its animations (a snapshot's `run_before`)."""
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


S = TypeVar("S", bound=Screen[Any])


async def on_screen(app: App[Any], kind: type[S], timeout: float = 30.0) -> S:
    """The app's screen once it is a `kind`: a key that pushes or pops a screen has done so only once the app has
    handled the message it posted, which under load can be after `pilot.press` returns (ci30: `m` and its
    confirmation, under six workers and two CPU hogs)."""
    screen = await eventually(
        lambda: app.screen, until=lambda s: isinstance(s, kind), timeout=timeout, what=kind.__name__
    )
    assert isinstance(screen, kind)
    return screen
