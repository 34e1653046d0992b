"""`start_mode` (connect --mode) and the presenter's autoplay tour (demo --autoplay)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from specdash.config import UIConfig
from specdash.remote.events import Connected
from specdash.ui.app import AUTOPLAY_LEVELS, SpecdashApp, make_app
from specdash.ui.widgets.modes import ModeList
from tests.support import scenarios as sc
from tests.support.fake_session import Event, FakeSession
from tests.support.notices import record_notices
from tests.support.settle import settle

SIZE = (120, 40)


def app_for(events: list[Event], **kwargs: object) -> tuple[SpecdashApp, FakeSession]:
    session = FakeSession(events)
    app = make_app(session, config_ui=UIConfig(bell=False), clock=lambda: sc.NOW, live=False, **kwargs)  # type: ignore[arg-type]
    return app, session


async def test_start_mode_waits_for_attach_then_starts() -> None:
    app, session = app_for([sc.MODES], start_mode="eagle3")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        session.emit(Connected(sc.HOST, 1))
        await pilot.pause()
        assert session.calls == []  # connected, but the session has not said whether a run is live
        session.emit(sc.STOPPED)
        await settle(app)
        assert session.calls == [("start", ("eagle3",))]


async def test_start_mode_leaves_a_live_server_alone() -> None:
    app, session = app_for([sc.RUNNING_EAGLE3], start_mode="baseline")
    notices = record_notices(app)
    async with app.run_test(size=SIZE):
        session.emit(Connected(sc.HOST, 1), sc.READY)
        await settle(app)  # the start-mode worker has ended: it said what it did
        assert session.calls == []
        assert any("not starting baseline" in n.message for n in notices), notices


async def test_autoplay_runs_an_ab_of_the_first_two_modes() -> None:
    app, session = app_for([sc.MODES], autoplay=True)
    async with app.run_test(size=SIZE) as pilot:
        session.emit(Connected(sc.HOST, 1), sc.STOPPED)
        await settle(app)
        await pilot.pause()
        assert session.calls == [("sweep", (("baseline", "eagle3"), AUTOPLAY_LEVELS))]
        assert app.screen.query_one(ModeList).marked == {"baseline", "eagle3"}


async def test_any_key_stops_the_tour_and_does_nothing_else() -> None:
    app, session = app_for([sc.MODES], autoplay=True)
    started = asyncio.Event()

    async def endless_sweep(modes: object, levels: object, *, reference: str | None = None) -> dict[str, object]:
        session.calls.append(("sweep", ()))
        started.set()
        await asyncio.Event().wait()
        return {}

    session.sweep = endless_sweep  # type: ignore[method-assign,assignment]
    notices = record_notices(app)
    async with app.run_test(size=SIZE) as pilot:
        session.emit(Connected(sc.HOST, 1), sc.STOPPED)
        await asyncio.wait_for(started.wait(), 5)
        await pilot.press("s")  # would start a server if the tour did not swallow it
        await settle(app)
        await pilot.pause()
        assert session.calls == [("sweep", ())]
        assert not [w for w in app.workers if w.group == "autoplay"]
        assert any("Autoplay stopped" in n.message for n in notices)


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 45)])
async def test_the_tour_shows_each_page_it_talks_about_at_every_size(size: tuple[int, int]) -> None:
    """A paged terminal follows the tour: the server page while a server starts, the sweep page while it
    measures, and the sweep page (table, charts, verdict) as the last screen; a wide one shows both."""
    app, session = app_for([sc.MODES], autoplay=True)
    step = asyncio.Queue[str]()
    go = asyncio.Event()

    async def scripted_sweep(modes: object, levels: object, *, reference: str | None = None) -> dict[str, object]:
        for events, name in (
            ((sc.LOADING,), "starting"),
            ((sc.READY, replace(sc.BENCH, rows=sc.ROWS[:2])), "measuring"),
            ((sc.LOADING,), "restarting"),
            ((sc.READY, replace(sc.BENCH, running=False)), "done"),
        ):
            session.emit(*events)
            await step.put(name)
            await go.wait()
            go.clear()
        return {}

    session.sweep = scripted_sweep  # type: ignore[method-assign, assignment]
    async with app.run_test(size=size) as pilot:
        session.emit(Connected(sc.HOST, 1), sc.STOPPED)
        dashboard = app.dashboard
        for expected in ("server", "bench", "server", "bench"):
            await asyncio.wait_for(step.get(), 10)
            await pilot.pause()
            if dashboard.paged:
                assert dashboard.page == expected
                shown, hidden = ("#bench", "#main") if expected == "bench" else ("#main", "#bench")
                assert dashboard.query_one(shown).display and not dashboard.query_one(hidden).display
            else:
                assert dashboard.query_one("#bench").display and dashboard.query_one("#main").display
            go.set()
        await settle(app)
        await pilot.pause()
        assert not [w for w in app.workers if w.group == "autoplay"]
        # The last screen: the verdict in view.
        verdict = dashboard.query_one("#bench-verdict")
        assert verdict.display and verdict.region.area > 0, verdict.region
