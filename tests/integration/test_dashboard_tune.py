"""A tune started from the dashboard's T view, over the real stack (embedded SSH host, simulator, restarts).

2 settings x 2 levels, one pass, 1-second levels: the view confirms (at most 3 restarts), shows the tune
live, and ends with a policy; the per-setting modes stay out of the mode list and the runner's listener
goes when the tune ends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from textual.widgets import Label, Static

from specdash.cli.demo_session import demo_session
from specdash.config import TuneConfig
from specdash.core.events import ModesChanged, TuneProgress
from specdash.phases import Phase
from specdash.server.remote_session import RemoteSession
from specdash.tune.journal import Journal
from specdash.ui.app import SpecdashApp, make_app
from specdash.ui.screens.confirm import ConfirmScreen
from specdash.ui.screens.tune import TuneScreen
from tests.support.eventually import eventually
from tests.support.notices import record_notices
from tests.support.settle import on_screen

FAST = 0.01
SMALL = TuneConfig("small", "eagle3", "steps=1,3 topk=1 draft=2", levels="1,4", repeats=1)


def _small_tune_app(session: RemoteSession) -> SpecdashApp:
    """The dashboard on `session` with the `SMALL` tune configured and 1 s levels."""
    session.config = replace(session.config, tunes={SMALL.name: SMALL})
    session.sweep_defaults = replace(session.sweep_defaults, duration_s=1.0)
    return make_app(session)


async def test_a_small_tune_started_in_the_view_finishes_with_a_policy() -> None:
    async with demo_session(FAST) as demo:
        session = demo.session
        app = _small_tune_app(session)
        seen: list[str] = []
        listed: list[set[str]] = []
        async with app.run_test(size=(160, 45)) as pilot:
            await asyncio.wait_for(session.attached.wait(), 30)
            listeners = len(session._listeners)  # noqa: SLF001 - the runner must leave no listener behind
            event = asyncio.Event()

            def wake(e: object) -> None:
                if isinstance(e, ModesChanged):
                    listed.append({m.name for m in e.modes})
                event.set()

            session.subscribe(wake)

            async def until(predicate: Callable[[], bool], timeout: float) -> None:
                async with asyncio.timeout(timeout):
                    await pilot.pause()
                    while not predicate():
                        event.clear()
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(event.wait(), 0.5)
                        await pilot.pause()

            await pilot.press("T")
            await until(lambda: isinstance(app.screen, TuneScreen), 30)
            live = app.screen.query_one("#tune-live", Static)
            show = live.update

            def shown(content: Any = "", *, layout: bool = True) -> None:
                """Keep every line the live status is set to. Its phases pass in about a second each, and a
                sample of the screen taken after each event came too late for one under two CPU hogs (ci31)."""
                seen.append(str(content))
                show(content, layout=layout)

            live.update = shown  # type: ignore[method-assign]
            await pilot.press("s")
            await until(lambda: isinstance(app.screen, ConfirmScreen), 30)
            assert "at most 3 restarts" in str(app.screen.query_one("#question", Label).render())
            await pilot.press("y")
            await until(lambda: session.tune_running(), 30)

            def progress() -> TuneProgress | None:
                return app.tune_progress

            await until(lambda: (p := progress()) is not None and p.phase != "running", 300)
            p = progress()
            assert p is not None and p.phase == "done", p
            await on_screen(app, TuneScreen)
            assert any("measuring baseline" in s for s in seen) and any("restarts 1 of 3" in s for s in seen), seen
            assert p.restarts == 3 and set(p.report["measured"]) == {"baseline", "s1-k1-d2", "s3-k1-d4"}
            assert p.report["policy"]["ranges"], "a policy"
            policy = str(app.screen.query_one("#tune-policy", Static).render())
            assert "C range" in policy and ("no speculation" in policy or "s1-k1-d2" in policy or "s3-k1-d4" in policy)
            assert "speedup vs C" in str(app.screen.query_one("#tune-chart", Static).render())
            assert (Journal.default_dir() / "small.jsonl").exists()
            session.unsubscribe(wake)
            assert len(session._listeners) == listeners  # noqa: SLF001
            tuned = {f"eagle3@{s}" for s in ("s1-k1-d2", "s3-k1-d4")}
            assert all(len(names & tuned) <= 1 for names in listed), "only the running setting is listed"


async def test_while_a_tune_runs_the_server_keys_are_refused_and_work_after_it() -> None:
    async with demo_session(FAST) as demo:
        session = demo.session
        app = _small_tune_app(session)
        notices = record_notices(app)
        async with app.run_test(size=(120, 40)) as pilot:
            await asyncio.wait_for(session.attached.wait(), 30)

            async def state() -> tuple[str, bool, bool, Phase]:
                await pilot.pause()
                return type(app.screen).__name__, session.tune_running(), session.sweep_running(), session.status.phase

            await pilot.press("T")
            await eventually(state, until=lambda s: s[0] == "TuneScreen", timeout=30, what="the Tune view")
            await pilot.press("s")
            await eventually(state, until=lambda s: s[0] == "ConfirmScreen", timeout=30, what="the tune's question")
            await pilot.press("y")
            # The tune measures its first setting on a ready server; back on the dashboard, stop, restart and
            # cancel the (tune's) sweep are each refused with one notification, and the tune goes on.
            measuring = (True, True, Phase.READY)
            await eventually(state, until=lambda s: s[1:] == measuring, timeout=120, what="the tune measuring")
            await pilot.press("escape")
            await eventually(state, until=lambda s: s[0] == "DashboardScreen", timeout=30, what="the dashboard")
            await pilot.press("x", "r", "escape")
            await pilot.pause()
            assert app.screen is app.dashboard, "no question was asked"
            refusals = [n.message for n in notices if n.title == "Tune running"]
            assert len(refusals) == 3, [n.message for n in notices]
            assert all(m.startswith("Tune small is running") and "T, then c" in m for m in refusals)
            assert not [w for w in app.workers if w.name in ("stop", "restart", "cancel sweep")]
            progress = app.tune_progress
            assert session.tune_running() and progress is not None and progress.phase == "running"

            # Cancelled in the Tune view (c), the tune ends; a server it left running is stopped by x again.
            await pilot.press("T")
            await eventually(state, until=lambda s: s[0] == "TuneScreen", timeout=30, what="the Tune view")
            await pilot.press("c")
            await eventually(state, until=lambda s: not s[1], timeout=60, what="the tune cancelled")
            assert app.tune_progress is not None and app.tune_progress.phase == "cancelled"
            await pilot.press("escape")
            await eventually(state, until=lambda s: s[0] == "DashboardScreen", timeout=30, what="the dashboard")
            # Cancelled while measuring, its server keeps running; while the next setting was starting (1 s levels
            # end fast), that start is stopped and nothing runs. Either way the view said which.
            after = app.tune_progress.after
            if after.startswith("nothing runs now"):
                await eventually(state, until=lambda s: s[3] is Phase.STOPPED, timeout=60, what="nothing running")
                return
            assert "keeps running" in after, after
            await eventually(state, until=lambda s: s[3] is Phase.READY, timeout=60, what="the server ready")
            await pilot.press("x")
            await eventually(state, until=lambda s: s[0] == "ConfirmScreen", timeout=30, what="the stop question")
            await pilot.press("y")
            await eventually(state, until=lambda s: s[3] is Phase.STOPPED, timeout=60, what="the server stopped")
