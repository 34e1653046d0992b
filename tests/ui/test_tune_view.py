"""The Tune view (`T`, and "Tune" in the command palette): the newest tune journal's policy and chart."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from textual.widgets import Label, Static

from specdash.core.events import TuneEntry, TuneProgress
from specdash.tune.journal import Journal
from specdash.ui.app import SpecdashApp
from specdash.ui.screens.confirm import ConfirmScreen
from specdash.ui.screens.tune import TuneScreen
from tests.support import scenarios as sc
from tests.support.notices import record_notices
from tests.support.settle import on_screen, settle
from tests.ui.conftest import AppFactory

HEADER = {"type": "header", "version": 1, "name": "night", "host": "gpu1", "base_mode": "eagle3",
          "baseline_mode": "baseline", "space": "steps=1,3 topk=1,4 draft=4,8", "levels": [1, 2, 4, 8],
          "repeats": 1, "noise_floor": 0.02, "settings": ["s3-k4-d8", "s1-k1-d2"]}  # fmt: skip
LEVELS = {
    "baseline": {1: 70.0, 2: 129.0, 4: 225.0, 8: 357.0},
    "s3-k4-d8": {1: 91.0, 2: 140.0, 4: 195.0, 8: 240.0},
    "s1-k1-d2": {1: 62.0, 2: 110.0, 4: 180.0},
}


def write_journal(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    lines = [HEADER]
    for name, levels in LEVELS.items():
        lines.append({"type": "startup", "candidate": name, "repeat": 0, "seconds": 6.0})
        lines += [{"type": "level", "candidate": name, "repeat": 0, "c": c, "tok_s": v} for c, v in levels.items()]
    lines.append({"type": "crash", "candidate": "s1-k1-d2", "repeat": 0, "c": 8, "reason": "RuntimeError: boom"})
    (directory / "night.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def shown(app: SpecdashApp, selector: str) -> str:
    return str(app.screen.query_one(selector, Static).render())


async def open_tune(app: SpecdashApp, pilot: object) -> None:
    await pilot.press("T")  # type: ignore[attr-defined]
    for _ in range(500):  # the view is pushed by a thread worker: wait for it, boundedly
        if isinstance(app.screen, TuneScreen):
            break
        await pilot.pause(0.01)  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 45)])
async def test_tune_view_shows_the_policy(build: AppFactory, size: tuple[int, int]) -> None:
    write_journal(Journal.default_dir())
    app, _ = build(sc.loading())
    async with app.run_test(size=size) as pilot:
        await open_tune(app, pilot)
        await on_screen(app, TuneScreen)
        summary = shown(app, "#tune-summary")
        assert "eagle3 vs baseline on gpu1: 2 settings x 4 levels; 3 restarts of 3" in summary
        assert "speculation stops paying above C = 2" in summary
        policy = shown(app, "#tune-policy")
        assert "s3-k4-d8" in policy and "no speculation" in policy and "1.300x" in policy
        assert "speedup vs C" in shown(app, "#tune-chart")
        await pilot.press("escape")
        assert not isinstance(app.screen, TuneScreen)


async def test_tune_view_without_a_tune_says_how_to_run_one(build: AppFactory) -> None:
    app, _ = build(sc.loading())
    async with app.run_test(size=(100, 30)) as pilot:
        await open_tune(app, pilot)
        assert "No tune yet" in shown(app, "#tune-summary")


async def test_tune_is_in_the_command_palette(build: AppFactory) -> None:
    app, _ = build(sc.loading())
    async with app.run_test(size=(100, 30)):
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Tune  T" in titles


# -- starting a tune from the view, and watching it --------------------------------------------------------

ENTRY = TuneEntry("night", "eagle3", "baseline", "steps=1,3 topk=1,4 draft=4,8", settings=5, levels=(1, 4, 16),
                  repeats=2, max_restarts=12)  # fmt: skip
BROKEN = TuneEntry("bad", "eagle3", "baseline", "k=1,2", problem="--space: mode eagle3 is SGLang; its axes are ...")


def progress(phase: str = "running", **changes: object) -> TuneProgress:
    """A step of a tune: the baseline and one setting measured at two levels, one setting dropped."""
    from specdash.core import tune as core
    from specdash.tune.journal import TuneState
    from specdash.tune.plan import TunePlan
    from specdash.tune.report import report
    from specdash.tune.runner import result_of

    state = TuneState()
    for name, levels in {"baseline": {1: 70.0, 4: 225.0}, "s3-k4-d8": {1: 91.0, 4: 195.0}}.items():
        state.apply({"type": "startup", "seconds": 6.0})
        for c, v in levels.items():
            state.apply({"type": "level", "candidate": name, "repeat": 0, "c": c, "tok_s": v})
    order = tuple(p for p in core.parse_space(ENTRY.space)[1] if p.label in ("s3-k4-d8", "s1-k1-d4"))
    plan = TunePlan("night", "gpu1", "eagle3", "baseline", "sglang", ENTRY.space, (1, 4, 16), 2, order, ())
    state.apply({"type": "drop", "candidate": "s1-k1-d4", "after": 0})
    rep = report(plan, result_of(plan, state))
    base: dict[str, object] = dict(
        name="night", phase=phase, line="[s3-k4-d8 #1 C=4] 195.0 tok/s", setting="s3-k4-d8", repeat=0, repeats=2,
        levels_done=2, levels_total=3, restarts=2, full_grid_restarts=12, dropped=("s1-k1-d4",), eta_s=390.0,
        report=rep, resume="specdash tune gpu1 --tune night --resume",
    )  # fmt: skip
    base.update(changes)
    return TuneProgress(**base)  # type: ignore[arg-type]


async def test_the_view_starts_a_config_entry_after_saying_how_many_restarts(build: AppFactory) -> None:
    app, session = build(sc.loading())
    session.tunes = (ENTRY, BROKEN)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_tune(app, pilot)
        live = shown(app, "#tune-live")
        assert "> night: eagle3 vs baseline, 5 settings x 3 levels, 2 passes: at most 12 restarts" in live
        assert "bad: cannot run: --space: mode eagle3 is SGLang" in live
        await pilot.press("s")
        await pilot.pause()
        await on_screen(app, ConfirmScreen)
        question = str(app.screen.query_one("#question", Label).render())
        assert "Start tune night" in question and "at most 12 restarts" in question
        await pilot.press("n")  # no: nothing starts
        await pilot.pause()
        await on_screen(app, TuneScreen)
        assert ("tune", ("night",)) not in session.calls
        await pilot.press("s", "y")
        for _ in range(500):
            if session.tune_running():
                break
            await pilot.pause(0.01)
        assert session.calls[-1] == ("tune", ("night",))


async def test_an_entry_that_cannot_run_is_not_started(build: AppFactory) -> None:
    app, session = build(sc.loading())
    session.tunes = (BROKEN,)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_tune(app, pilot)
        await pilot.press("s")
        await pilot.pause()
        assert isinstance(app.screen, TuneScreen) and not any(c[0] == "tune" for c in session.calls)


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 45)])
async def test_a_running_tune_is_shown_live_and_cancelled(build: AppFactory, size: tuple[int, int]) -> None:
    app, session = build(sc.loading())
    session.tunes = (ENTRY,)
    async with app.run_test(size=size) as pilot:
        await open_tune(app, pilot)
        assert "No tune yet" in shown(app, "#tune-summary")
        session.tuning.set()  # as if `s` had started it
        session.emit(progress())
        await pilot.pause()
        live = shown(app, "#tune-live")
        assert "measuring s3-k4-d8 (pass 1/2): levels 2/3 done" in live
        assert "restarts 2 of 12 (full grid); dropped: s1-k1-d4" in live
        # One time left on the screen: the runner's refined 390 s on the title, none in the body.
        assert "restarts left; the time left (on the title) is re-estimated" in live and "ETA" not in live
        assert str(app.screen.query_one("#tune-dialog").border_title) == "Tune night · about 6m 30s left"
        assert "1.300x" in shown(app, "#tune-policy"), "the policy fills in from the levels measured so far"
        assert "speedup vs C" in shown(app, "#tune-chart")
        await pilot.press("c")
        await pilot.pause()
        assert ("cancel_tune", ()) in session.calls
        after = "nothing runs now: eagle3@s1-k1-d4, starting for the tune's next setting, was stopped"
        session.emit(progress("cancelled", setting="", after=after))
        await pilot.pause()
        live = shown(app, "#tune-live")
        assert f"tune night cancelled: {after}" in live, "the screen says what runs after the cancel"
        assert "finished levels are kept; specdash tune gpu1 --tune night --resume continues" in live
        assert "1.300x" in shown(app, "#tune-policy"), "finished results stay on the screen"


async def test_the_view_opened_mid_tune_shows_its_progress(build: AppFactory) -> None:
    app, session = build(sc.loading())
    async with app.run_test(size=(100, 30)) as pilot:
        session.emit(progress())  # the tune's steps arrive while the view is closed
        await pilot.pause()
        await open_tune(app, pilot)
        assert "measuring s3-k4-d8" in shown(app, "#tune-live")


async def test_keys_that_touch_the_server_are_refused_while_a_tune_runs(build: AppFactory) -> None:
    app, session = build(sc.ready_with_bench())
    notices = record_notices(app)
    async with app.run_test(size=(120, 40)) as pilot:
        session.tune_name = "night"
        session.tuning.set()  # as if the Tune view had started it
        # stop, restart, switch to mode 1, sweep, greedy check, A/B of modes 1 and 2; then, with the tune's
        # sweep running, cancel it; then, between two of its restarts, start a mode.
        await pilot.press("x", "r", "1", "m", "b", "o", "space", "2", "space", "a")
        session.sweeping = True
        await pilot.press("escape")
        session.sweeping = False
        session.emit(sc.STOPPED)
        await pilot.press("s")
        await settle(app)
        await pilot.pause()
        refusals = [n for n in notices if n.title == "Tune running"]
        assert len(refusals) == 8 == len(notices), [n.message for n in notices]
        assert all("Tune night is running" in n.message and "T, then c" in n.message for n in refusals)
        assert "stopping the server is refused" in refusals[0].message
        assert "starting a mode is refused" in refusals[-1].message
        assert session.calls == [], "nothing reached the session"
        assert app.screen is app.dashboard, "no question was asked"
        assert session.tune_running()

        session.tuning.clear()  # the tune ends: the keys work again
        session.emit(sc.READY)
        await pilot.press("x")
        await pilot.pause()
        await on_screen(app, ConfirmScreen)
        await pilot.press("y")
        await settle(app)
        assert session.calls == [("stop", ())]


async def test_quitting_while_a_tune_runs_asks_first_and_says_how_it_goes_on(build: AppFactory) -> None:
    """Between two of its sweeps (restarting the server) a tune runs no sweep, and quitting still ends it: `q`
    asks first, naming the tune, what is kept and the command that goes on from there."""
    app, session = build(sc.ready_with_bench())
    async with app.run_test(size=(120, 40)) as pilot:
        session.tune_name = "night"
        session.tuning.set()
        session.emit(progress())
        await settle(app)
        await pilot.press("q")
        await pilot.pause()
        await on_screen(app, ConfirmScreen)  # quit without asking
        question = str(app.screen.query_one("#question", Label).render())
        assert "Tune night stops" in question and "specdash tune gpu1 --tune night --resume" in question, question
        await pilot.press("n")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen) and app.is_running


def baseline_only(phase: str = "running", **changes: object) -> TuneProgress:
    """A tune that has measured only the baseline (its first restart) so far."""
    from specdash.core import tune as core
    from specdash.tune.journal import TuneState
    from specdash.tune.plan import TunePlan
    from specdash.tune.report import report
    from specdash.tune.runner import result_of

    state = TuneState()
    state.apply({"type": "startup", "candidate": "baseline", "repeat": 0, "seconds": 6.0})
    for c, v in {1: 70.0, 4: 225.0}.items():
        state.apply({"type": "level", "candidate": "baseline", "repeat": 0, "c": c, "tok_s": v})
    order = tuple(core.parse_space(ENTRY.space)[1][: ENTRY.settings])
    plan = TunePlan("night", "gpu1", "eagle3", "baseline", "sglang", ENTRY.space, (1, 4, 16), 2, order, ())
    base = progress(phase, report=report(plan, result_of(plan, state)), restarts=1, dropped=())
    return replace(base, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 45)])
async def test_no_verdict_on_speculation_before_a_speculative_setting_is_measured(
    build: AppFactory, size: tuple[int, int]
) -> None:
    app, session = build(sc.loading())
    async with app.run_test(size=size) as pilot:
        await open_tune(app, pilot)
        session.tuning.set()
        session.emit(baseline_only())
        await pilot.pause()
        summary = shown(app, "#tune-summary")
        assert "never pays" not in summary and "stops paying" not in summary
        assert "no speculative setting measured yet" in summary
        assert "no speculation" not in shown(app, "#tune-policy"), "no policy row before a speculative level"
        assert "speedup vs C" not in shown(app, "#tune-chart")


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 45)])
async def test_after_a_cancel_the_view_says_what_runs_and_saves_nothing(
    build: AppFactory, size: tuple[int, int]
) -> None:
    """Cancelled after the first restart of a 12-restart tune: no "11 saved"; the first lines say what runs."""
    app, session = build(sc.loading())
    async with app.run_test(size=size) as pilot:
        await open_tune(app, pilot)
        after = "nothing runs now: eagle3@s3-k4-d8, starting for the tune's next setting, was stopped"
        session.emit(baseline_only("cancelled", setting="", after=after, eta_s=None))
        await pilot.pause()
        live = shown(app, "#tune-live")
        assert live.splitlines()[0] == f"tune night cancelled: {after}"[: len(live.splitlines()[0])]
        assert after in live.replace("\n", " ") or after in live
        summary = shown(app, "#tune-summary")
        assert "1 restarts of 12 (0 saved by the drop rule)" in summary.replace("\n", " ")
        assert "never pays" not in summary
