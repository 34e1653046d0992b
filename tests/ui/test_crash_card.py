"""A crash mid-sweep gets a card under the sweep table: the level and the requests running when the server
died, the exception and the last log lines, and `R` to rerun the levels around it once the server is back."""

from __future__ import annotations

from dataclasses import replace

import pytest
from textual.widgets import Input, Label

from specdash.core.events import BenchTick
from specdash.phases import CrashInfo
from specdash.ui.screens.confirm import LevelsScreen
from specdash.ui.widgets.bench import BenchTable
from tests.support import scenarios as sc
from tests.support.notices import record_notices
from tests.support.settle import on_screen, settle, settle_screen
from tests.ui.conftest import AppFactory

CRASHED_AT_20 = replace(
    sc.BENCH,
    rows=(*sc.ROWS[:5], replace(sc.ROWS[5], status="failed", crash=sc.CRASH_REASON)),
    running=False,
)
DIED = replace(sc.CRASHED, crash=CrashInfo(sc.CRASH_REASON, sc.CRASH_LINES))


@pytest.mark.parametrize("size", [(80, 24), (160, 45)])
async def test_a_crash_mid_sweep_names_its_level_and_R_reruns_the_levels_around_it(
    build: AppFactory, size: tuple[int, int]
) -> None:
    app, session = build(sc.ready_with_bench()[:4])
    notices = record_notices(app)
    async with app.run_test(size=size) as pilot:
        # The level's last tick: its sum of in-flight reports (8) is no load; the count at the lost connection is.
        session.emit(BenchTick("eagle3", 20, 3.0, 1900.0, 20, 64, inflight=8, in_flight_at_loss=14))
        await settle_screen(pilot)
        session.emit(CRASHED_AT_20, DIED)
        if size[0] < 150:
            await pilot.press("v")
        await settle_screen(pilot)
        card = str(app.screen.query_one("#bench-crash", Label).render())
        assert card.startswith(f"✗ CRASH at C=20 (eagle3, 14 requests running): {sc.CRASH_REASON}\n")
        # The last log lines before it (the exception line itself is in the first line), then the way out.
        assert '  │   File "/sglang/srt/model_executor/model_runner.py", line 312, in load_model\n' in card
        assert "  │ [2025-04-16 14:22:53] Received sigquit from a child process" in card
        assert card.splitlines()[1] == "  s starts eagle3 again, then R reruns C=5,20 · c: the crash in the log"
        await pilot.press("R")  # the server is down: R says why it does nothing
        await settle_screen(pilot)
        assert any("The server is not ready: s starts eagle3, then R reruns" in n.message for n in notices)
        assert not isinstance(app.screen, LevelsScreen)
        session.emit(sc.READY)
        await settle_screen(pilot)
        card = str(app.screen.query_one("#bench-crash", Label).render())
        assert "R: rerun eagle3 at C=5,20 (the crash's level and its neighbours)" in card
        await pilot.press("R")
        await on_screen(app, LevelsScreen)
        await pilot.press("enter")
        await settle(app)
        assert session.calls[-1] == ("sweep", (("eagle3",), (5, 20)))
        await pilot.press("b")  # the rerun's levels are not the next sweep's default
        await on_screen(app, LevelsScreen)
        assert app.screen.query_one("#levels", Input).value != "5, 20"
        assert app.dashboard.query_one(BenchTable).row_count >= 3


async def test_a_crash_no_request_saw_gives_no_count_until_one_does(build: AppFactory) -> None:
    """Ticks with requests in flight but no lost connection give no count: a tick's in-flight figure is a sum of
    each probe process's last report, which right after a crash mixes "all failed" with "8 running" (the CI run
    of 2026-12-06 showed "8 requests running" for a crash that needs more than 10). The card gives no count
    rather than that, and gets the count when a tick brings it, also after the card was drawn."""
    app, session = build(sc.ready_with_bench()[:4])
    async with app.run_test(size=(160, 45)) as pilot:
        session.emit(BenchTick("eagle3", 20, 3.0, 900.0, 4, 64, inflight=8))
        session.emit(BenchTick("eagle3", 20, 3.25, 0.0, 4, 64, inflight=0))
        await settle_screen(pilot)
        session.emit(CRASHED_AT_20, DIED)
        await settle_screen(pilot)
        card = str(app.screen.query_one("#bench-crash", Label).render())
        assert card.startswith(f"✗ CRASH at C=20 (eagle3): {sc.CRASH_REASON}\n"), card
        session.emit(BenchTick("eagle3", 20, 3.5, 0.0, 20, 64, inflight=0, in_flight_at_loss=16))
        await settle_screen(pilot)
        card = str(app.screen.query_one("#bench-crash", Label).render())
        assert card.startswith(f"✗ CRASH at C=20 (eagle3, 16 requests running): {sc.CRASH_REASON}\n"), card


async def test_the_level_that_ended_by_the_crash_brings_its_own_count(build: AppFactory) -> None:
    """A level the crash failed (its result came) carries the count in its row; no tick had to bring it."""
    app, session = build(sc.ready_with_bench()[:4])
    row = replace(sc.ROWS[5], status="failed", crash=sc.CRASH_REASON, in_flight_at_loss=11)
    async with app.run_test(size=(160, 45)) as pilot:
        session.emit(replace(CRASHED_AT_20, rows=(*sc.ROWS[:5], row)), DIED)
        await settle_screen(pilot)
        card = str(app.screen.query_one("#bench-crash", Label).render())
        assert card.startswith(f"✗ CRASH at C=20 (eagle3, 11 requests running): {sc.CRASH_REASON}\n"), card
