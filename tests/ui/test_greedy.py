"""Pilot tests of the greedy spot check in the dashboard: key `o`, the reference it picks, and how the sweep
panel shows the outcome (a difference is a finding: warning colour, wrapped, never cut)."""

from __future__ import annotations

from textual.widgets import Label

from specdash.core.events import GreedyUpdate
from specdash.core.greedy import compare_outputs
from specdash.ui.app import SpecdashApp
from specdash.ui.widgets.bench import BenchPanel
from tests.support import scenarios as sc
from tests.support.settle import settle
from tests.ui.conftest import AppFactory

REF = [f"The answer to prompt {i} is a long greedy text that goes on for a while." for i in range(8)]
DIVERGED = [*REF[:3], REF[3][:20] + "something else entirely, which the reference never said.", *REF[4:]]


def greedy_label(app: SpecdashApp) -> Label:
    return app.screen.query_one("#bench-greedy", Label)


async def test_o_checks_the_live_mode_against_the_first_configured_mode(build: AppFactory) -> None:
    app, session = build(sc.ready_with_bench()[:4])
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("o")
        await settle(app)
        assert session.calls == [("check_greedy", ("baseline",))]


async def test_o_takes_the_first_marked_mode_as_the_reference(build: AppFactory) -> None:
    app, session = build(sc.ready_with_bench()[:4])
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2", "space", "3", "space", "o")
        await settle(app)
        assert session.calls == [("check_greedy", ("eagle3",))]


async def test_o_needs_a_ready_server(build: AppFactory) -> None:
    app, session = build(sc.loading())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("o")
        await settle(app)
        assert session.calls == []
        assert app.screen.check_action("greedy", ()) is False


async def test_a_difference_is_a_finding_shown_in_full_at_80_columns(build: AppFactory) -> None:
    app, session = build(sc.ready_with_bench())
    check = compare_outputs("baseline", "eagle3", REF, DIVERGED)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("v")  # the sweep page
        session.emit(GreedyUpdate("eagle3", "baseline", 8, running=True))
        await pilot.pause()
        assert "greedy check: eagle3, 8 prompts" in str(greedy_label(app).render())
        assert app.screen.check_action("greedy", ()) is False  # one check at a time
        session.emit(GreedyUpdate("eagle3", "baseline", 8, check=check, note="baseline's outputs from today"))
        await pilot.pause()
        label = greedy_label(app)
        shown = str(label.render())
        assert shown.startswith("⚠ greedy check eagle3 vs baseline: 7/8 outputs identical; first difference")
        assert "prompt 3, character 20" in shown and "something else" in shown
        assert label.has_class("-finding")
        # Wrapped within the panel, not cut: every line fits, and the label is as tall as its lines.
        width = label.content_region.width
        lines = label.render_lines(label.content_region.reset_offset)
        assert label.size.height >= shown.count("\n") + 2  # the first line alone needs two rows at 80
        assert all(line.cell_length <= width for line in lines)
        assert app.screen.check_action("greedy", ()) is True


async def test_identical_outputs_and_notes_are_not_findings(build: AppFactory) -> None:
    app, session = build(sc.ready_with_bench())
    async with app.run_test(size=(160, 45)) as pilot:
        session.emit(GreedyUpdate("eagle3", "baseline", 8, check=compare_outputs("baseline", "eagle3", REF, REF)))
        await pilot.pause()
        assert str(greedy_label(app).render()) == "✓ greedy check eagle3 vs baseline: 8/8 outputs identical"
        assert not greedy_label(app).has_class("-finding")
        note = "eagle3's outputs are stored; baseline has none for these 8 prompts on gpu-box yet"
        session.emit(GreedyUpdate("eagle3", "baseline", 8, note=note))
        await pilot.pause()
        assert str(greedy_label(app).render()) == f"greedy check: {note}"
        assert not greedy_label(app).has_class("-finding")


async def test_the_check_shows_the_sweep_panel_before_any_sweep(build: AppFactory) -> None:
    app, session = build(sc.ready_with_bench()[:4])
    async with app.run_test(size=(160, 45)) as pilot:
        assert not app.screen.query_one(BenchPanel).has_data
        session.emit(GreedyUpdate("eagle3", "baseline", 8, running=True))
        await pilot.pause()
        assert app.screen.query_one(BenchPanel).has_data and greedy_label(app).display
