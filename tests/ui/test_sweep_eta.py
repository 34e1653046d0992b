"""A sweep's and an A/B's confirmation give the expected duration (from the host's startup history and the
levels), and once confirmed the table's title counts it down, saying `overdue by` once it has run out."""

from __future__ import annotations

from textual.widgets import Label

from specdash.config import UIConfig
from specdash.core.events import BenchUpdate
from specdash.ui.app import SpecdashApp, make_app
from specdash.ui.screens.confirm import ConfirmScreen, LevelsScreen
from specdash.ui.widgets.bench import BenchTable
from tests.support import scenarios as sc
from tests.support.fake_session import FakeSession, FakeTunes
from tests.support.settle import on_screen, settle, settle_screen


def _app(now: list[float]) -> tuple[SpecdashApp, FakeSession]:
    """The app on a clock the test moves (`now[0]`), the fake session holding baseline's five recorded starts."""
    session = FakeSession(sc.ready_with_bench()[:4], label="root@gpu-box")
    session.ready_s = {"baseline": (30.0, 32.0, 31.0, 29.0, 35.0)}
    session.level_s = 9.0
    app = make_app(session, config_ui=UIConfig(), clock=lambda: now[0], live=False, tunes=FakeTunes(session))
    return app, session


def _text(app: SpecdashApp, selector: str) -> str:
    return str(app.screen.query_one(selector, Label).render())


async def test_the_ab_confirmation_gives_its_expected_time_and_the_table_counts_it_down() -> None:
    now = [sc.NOW]
    app, session = _app(now)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("1", "space", "2", "space", "a")
        await on_screen(app, LevelsScreen)
        await pilot.press("ctrl+u", *"1,5,10")
        await pilot.pause()
        expected = "about 1m 25s: baseline restart ~31s from 5 starts + 6 levels x 9s"
        assert _text(app, "#levels-eta") == f"Expected: {expected}"  # redone as the levels are edited
        await pilot.press("enter")
        await on_screen(app, ConfirmScreen)
        assert _text(app, "#question").endswith(f"\n\nExpected: {expected}.")
        await pilot.press("y")
        await settle(app)
        assert session.calls[-1][0] == "sweep"
        table = app.dashboard.query_one(BenchTable)
        assert table.border_title == "Sweep · about 1m 25s left"
        now[0] += 60
        app.dashboard._tick_clock()  # noqa: SLF001 - the once-a-second tick (tests run without timers)
        assert table.border_title == "Sweep · about 25s left"
        now[0] += 37
        app.dashboard._tick_clock()  # noqa: SLF001
        assert table.border_title == "Sweep · overdue by 12s"
        session.emit(BenchUpdate(rows=sc.ROWS, curves=sc.BENCH.curves, running=False))
        await settle_screen(pilot)
        assert table.border_title == "Sweep"  # ended: nothing left to count


async def test_with_no_start_recorded_the_estimate_says_so() -> None:
    now = [sc.NOW]
    app, session = _app(now)
    session.ready_s = {}
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("1", "space", "2", "space", "a", "ctrl+u", *"1,5,10", "enter")
        await on_screen(app, ConfirmScreen)
        question = _text(app, "#question")
        assert "Expected: no estimate: restart time unknown: no start of baseline recorded + 6 levels x 9s." in question
        await pilot.press("y")
        await settle(app)
        assert app.dashboard.query_one(BenchTable).border_title == "Sweep · running 0s, no estimate"
