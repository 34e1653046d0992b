"""The tune's confirmation gives its expected duration (the host's recorded starts of the baseline and the mode,
the levels and their length, the verification) and, once started, the Tune view's title counts it down, saying
`overdue by` once it has run out; the sweep's and the A/B's do the same (`test_sweep_eta`)."""

from __future__ import annotations

import pytest
from textual.widgets import Label

from specdash.config import UIConfig
from specdash.ui.app import SpecdashApp, make_app
from specdash.ui.screens.confirm import ConfirmScreen
from specdash.ui.screens.tune import TuneScreen
from tests.support import scenarios as sc
from tests.support.fake_session import FakeSession, FakeTunes
from tests.support.settle import on_screen, settle
from tests.ui.test_tune_view import ENTRY, open_tune, progress

# 2 passes of (baseline + 5 settings) and the verification's restart; 6 x 2 x 3 levels, the verification's 3
# again and its hold of 3: 2 x 31 + 11 x 41 + 42 x 9 = 891 s.
EXPECTED = (
    "about 14m 51s: 2 x baseline restart ~31s from 5 starts + 11 x eagle3 restart ~41s from 3 starts + 42 levels x 9s"
)


def _app(now: list[float]) -> tuple[SpecdashApp, FakeSession]:
    """The app on a clock the test moves (`now[0]`), the fake session with recorded starts of both modes."""
    session = FakeSession(sc.loading(), label="root@gpu-box")
    session.tunes = (ENTRY,)
    session.ready_s = {"baseline": (30.0, 32.0, 31.0, 29.0, 35.0), "eagle3": (40.0, 41.0, 44.0)}
    session.level_s = 9.0
    app = make_app(session, config_ui=UIConfig(), clock=lambda: now[0], live=False, tunes=FakeTunes(session))
    return app, session


def _title(app: SpecdashApp) -> str:
    return str(app.screen.query_one("#tune-dialog").border_title)


async def _start(app: SpecdashApp, session: FakeSession, pilot: object) -> str:
    """Open the view, press s, return the confirmation's question, then say yes and wait for the tune."""
    await open_tune(app, pilot)
    await pilot.press("s")  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]
    await on_screen(app, ConfirmScreen)
    question = str(app.screen.query_one("#question", Label).render())
    await pilot.press("y")  # type: ignore[attr-defined]
    await settle(app)
    assert session.calls[-1] == ("tune", ("night",))
    return question


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 45)])
async def test_the_tune_confirmation_gives_its_expected_time_and_the_view_counts_it_down(
    size: tuple[int, int],
) -> None:
    now = [sc.NOW]
    app, session = _app(now)
    async with app.run_test(size=size) as pilot:
        question = await _start(app, session, pilot)
        assert "at most 12 restarts" in question
        assert question.endswith(f"\n\nExpected at most, with the verification: {EXPECTED}."), question
        session.emit(progress(eta_s=None))  # the tune's first step, before the runner has an estimate of its own
        await pilot.pause()
        screen = await on_screen(app, TuneScreen)
        assert _title(app) == "Tune night · about 14m 51s left"
        now[0] += 600
        screen._tick()  # noqa: SLF001 - the once-a-second tick (tests run without timers)
        assert _title(app) == "Tune night · about 4m 51s left"
        now[0] += 300
        screen._tick()  # noqa: SLF001
        assert _title(app) == "Tune night · overdue by 9s"
        await pilot.press("escape")  # closed and opened again: the count goes on from the tune's start
        await open_tune(app, pilot)
        assert _title(app) == "Tune night · overdue by 9s"
        # The runner's own estimate (390 s, from what it measured) replaces the confirmation's: one figure.
        session.emit(progress())
        await pilot.pause()
        assert _title(app) == "Tune night · about 6m 30s left"
        assert "ETA" not in str(app.screen.query_one("#tune-live").render())
        now[0] += 400
        (await on_screen(app, TuneScreen))._tick()  # noqa: SLF001 - the screen opened again
        assert _title(app) == "Tune night · overdue by 10s"
        session.emit(progress("done", setting="", line="done: 12 restarts of 12 for the full grid"))
        await pilot.pause()
        assert _title(app) == "Tune night", "ended: nothing left to count"


async def test_with_no_start_recorded_the_tune_estimate_says_so() -> None:
    now = [sc.NOW]
    app, session = _app(now)
    session.ready_s = {"baseline": (30.0,)}
    async with app.run_test(size=(100, 30)) as pilot:
        question = await _start(app, session, pilot)
        assert (
            "Expected at most, with the verification: no estimate: 2 x baseline restart ~30s from 1 start"
            " + restart time unknown: no start of eagle3 recorded + 42 levels x 9s." in question
        ), question
        session.emit(progress(eta_s=None))  # nor does the runner know yet
        await pilot.pause()
        now[0] += 65
        (await on_screen(app, TuneScreen))._tick()  # noqa: SLF001
        assert _title(app) == "Tune night · running 1m 05s, no estimate"
