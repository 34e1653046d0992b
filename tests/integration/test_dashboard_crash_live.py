"""The crash card, the sweep estimate and the A/B's policy over the real stack: the demo's embedded SSH host,
the simulator (time-scaled), real sweeps and the real startup history in the demo's store.

- A sweep of `eagle3-dynamic` (the simulator's `crash-at-batch=10` fault) crashes the server at C=16: the card
  under the table names the level, the mode, the exception and the log lines before it; `s` brings the server
  back and `R` opens the rerun dialog with the levels around the crash.
- `RemoteSession.sweep_estimate` from the store: after the crash, the A/B dialog names the crashed mode's
  recorded start (and a mode never started as unknown).
- After a real A/B, `y` copies the policy that came on its `BenchUpdate`, in the engine's own flags.

Waiting is on the session's events with deadlines (`Waker.until`), never on sleeps.
"""

from __future__ import annotations

import re
from dataclasses import replace

from textual.widgets import Input, Label

from specdash.core.status_text import duration
from specdash.phases import Phase
from specdash.server.remote_session import RemoteSession
from specdash.ui.app import SpecdashApp
from specdash.ui.screens.confirm import ConfirmScreen, LevelsScreen
from tests.integration.test_dashboard_live import live_demo, text
from tests.support.notices import record_notices

CRASH_LINE = "RuntimeError: The size of tensor a (160) must match the size of tensor b (2)"


def recorded_start(session: RemoteSession, mode: str) -> float:
    """The one start of `mode` the store holds for this host (seconds to ready), as the session recorded it."""
    assert session.store is not None
    starts = [r for r in session.store.startups(host=session.label, mode=mode, limit=10) if r.outcome == "ready"]
    assert len(starts) == 1 and starts[0].total_s, starts
    return float(starts[0].total_s)


def card(app: SpecdashApp) -> str:
    return str(app.screen.query_one("#bench-crash", Label).render())


async def test_a_crash_mid_sweep_gets_its_card_and_R_reruns_around_it_over_the_real_stack() -> None:
    async with live_demo() as (session, app, pilot, wake):
        session.sweep_defaults = replace(session.sweep_defaults, duration_s=1.0)
        await pilot.press("3", "s")  # eagle3-dynamic: crashes at batch 10
        await wake.until(lambda: session.status.mode == "eagle3-dynamic" and session.status.phase is Phase.READY)
        started = recorded_start(session, "eagle3-dynamic")

        await pilot.press("b")
        await wake.until(lambda: isinstance(app.screen, LevelsScreen))
        app.screen.query_one("#levels", Input).value = "1,4,16"
        await pilot.pause()
        assert text(app, "#levels-eta") == "Expected: about 3s: 3 levels x 1s"  # the live server: no restart
        await pilot.press("enter")
        await wake.until(lambda: session.sweep_running())
        await wake.until(lambda: not session.sweep_running() and card(app) != "", timeout=60)
        shown = card(app)
        lines = shown.splitlines()
        assert shown.startswith("✗ CRASH at C=16 (eagle3-dynamic"), shown
        # The fault fires above a batch of 10. The count is the last tick's that saw requests running; a crash
        # before any tick saw one (it can come within the level's first tick) gives no count, never "0".
        running = re.search(r"\(eagle3-dynamic, (\d+) requests running\): ", lines[0])
        assert (running is not None and int(running.group(1)) > 10) or "(eagle3-dynamic): " in lines[0], shown
        assert CRASH_LINE in lines[0], shown
        assert lines[1] == "  s starts eagle3-dynamic again, then R reruns C=4,16 · c: the crash in the log", shown
        assert len([line for line in lines if line.startswith("  │ ")]) == 3, "the last 3 log lines before it"
        assert session.status.phase is not Phase.READY

        # The A/B dialog's estimate from the store: eagle3-dynamic's one recorded start, eagle3 never started.
        await pilot.press("2", "space", "3", "space", "a")
        await wake.until(lambda: isinstance(app.screen, LevelsScreen))
        app.screen.query_one("#levels", Input).value = "1,4"
        await pilot.pause()
        eta = text(app, "#levels-eta")
        assert f"eagle3-dynamic restart ~{duration(started)} from 1 start" in eta, eta
        assert "restart time unknown: no start of eagle3 recorded" in eta and "4 levels x 1s" in eta, eta
        await pilot.press("escape")
        await pilot.press("2", "space", "3", "space")  # unmarked again

        await pilot.press("s")  # eagle3-dynamic again
        await wake.until(lambda: session.status.phase is Phase.READY and "R: rerun" in card(app))
        assert card(app).splitlines()[1].startswith("  R: rerun eagle3-dynamic at C=4,16 (the crash's level")
        await pilot.press("R")
        await wake.until(lambda: isinstance(app.screen, LevelsScreen))
        assert "Rerun eagle3-dynamic around its crash at C=16" in text(app, "#question")
        assert app.screen.query_one("#levels", Input).value.replace(" ", "") == "4,16"
        assert text(app, "#levels-eta") == "Expected: about 2s: 2 levels x 1s"
        await pilot.press("escape")


async def test_after_an_ab_y_copies_the_policy_in_the_engines_flags() -> None:
    """The policy rides on the real `BenchUpdate` of an A/B (baseline live, measured first; eagle3 restarts)."""
    async with live_demo() as (session, app, pilot, wake):
        session.sweep_defaults = replace(session.sweep_defaults, duration_s=1.0)
        await pilot.press("1", "s")
        await wake.until(lambda: session.status.mode == "baseline" and session.status.phase is Phase.READY)
        await pilot.press("1", "space", "2", "space", "a")
        await wake.until(lambda: isinstance(app.screen, LevelsScreen))
        app.screen.query_one("#levels", Input).value = "1,4"
        await pilot.press("enter")
        await wake.until(lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wake.until(lambda: session.sweep_running())
        await wake.until(lambda: not session.sweep_running(), timeout=90)
        assert list(session.results) == ["baseline", "eagle3"]

        notices = record_notices(app)
        await pilot.press("y")
        await wake.until(lambda: any("Copied" in n.message for n in notices))
        copied = app.clipboard
        assert "#### The policy: eagle3 or baseline by load, in sglang's flags" in copied, copied
        assert "--speculative-algorithm EAGLE3" in copied and "--speculative-num-steps" in copied, copied
