"""Pilot tests for the bench area and GPU panel: sweeps and A/B go through the levels modal to the session."""

from __future__ import annotations

import pytest
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widgets import DataTable, Label

from specdash.core.events import BenchTick, BenchUpdate
from specdash.core.levels import DEFAULT_LEVELS, parse_levels
from specdash.errors import UsageError
from specdash.ui.screens.confirm import ConfirmScreen, LevelsScreen
from specdash.ui.widgets.bench import BenchLines, BenchPanel, BenchTable, row_cells
from specdash.ui.widgets.charts import CurvesChart, LiveChart, nice_ticks
from specdash.ui.widgets.gpu import GpuPanel
from tests.support import scenarios as sc
from tests.support.notices import record_notices
from tests.support.settle import on_screen, settle, settle_screen
from tests.ui.conftest import AppFactory

SIZE = (120, 40)


async def test_b_asks_for_levels_then_sweeps_the_live_mode(build: AppFactory) -> None:
    app, session = build(sc.ready_with_bench()[:4])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("b")
        await on_screen(app, LevelsScreen)
        await pilot.press("enter")
        await settle(app)
        assert session.calls == [("sweep", (("eagle3",), DEFAULT_LEVELS))]


async def test_levels_are_editable_and_validated(build: AppFactory) -> None:
    app, session = build(sc.ready_with_bench()[:4])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("b", "ctrl+u", *"4, 1 x", "enter")
        await on_screen(app, LevelsScreen)
        assert "'x' is not a concurrency level" in str(app.screen.query_one("#levels-error", Label).render())
        await pilot.press("backspace", *"16", "enter")
        await settle(app)
        assert session.calls == [("sweep", (("eagle3",), (1, 4, 16)))]
        await pilot.press("b")
        await on_screen(app, LevelsScreen)
        await pilot.press("escape")
        await settle(app)
        assert len(session.calls) == 1


async def test_ab_marks_modes_and_confirms_when_a_server_is_live(build: AppFactory) -> None:
    app, session = build(sc.ready_with_bench()[:4])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("a")
        assert not isinstance(app.screen, LevelsScreen)  # nothing marked: `a` does not apply
        await pilot.press("1", "space", "2", "space", "a")
        await on_screen(app, LevelsScreen)
        await pilot.press("enter")
        await on_screen(app, ConfirmScreen)
        # The live mode (eagle3) goes first and is measured as it runs; the dialog says exactly that.
        assert str(app.screen.query_one("#question", Label).render()) == (
            "A/B eagle3 vs baseline on root@gpu-box: measures eagle3 as it runs (pid 1234, no restart), "
            "then restarts into baseline.\n\nExpected: no estimate: restart time unknown: no start of baseline "
            "recorded + 14 levels of unknown length (request-count levels: set a duration to know)."
        )
        assert session.calls == []
        await pilot.press("y")
        await settle(app)
        # Measured live-first, but the reference stays the first marked mode (baseline), not the live one.
        assert session.calls == [("sweep", (("eagle3", "baseline"), DEFAULT_LEVELS, "baseline"))]


async def test_cancel_sweep_only_while_one_runs_and_after_confirming(build: AppFactory) -> None:
    app, session = build(sc.ready_with_bench()[:4])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("escape")
        assert app.screen is app.dashboard
        session.sweeping = True
        app.dashboard.refresh_bindings()
        await pilot.press("escape")
        await on_screen(app, ConfirmScreen)
        await pilot.press("y")
        await settle(app)
        assert session.calls == [("cancel_sweep", ())]


async def test_bench_update_fills_table_curves_and_notes(build: AppFactory) -> None:
    app, session = build(sc.ready_with_bench()[:4])
    async with app.run_test(size=SIZE) as pilot:
        panel = app.screen.query_one(BenchPanel)
        assert panel.has_class("-empty")
        session.emit(sc.BENCH, *sc.TICKS[:10])
        await pilot.pause()
        assert not panel.has_class("-empty")
        table = app.screen.query_one("#bench-table", DataTable)
        assert table.row_count == len(sc.ROWS)
        first = next(iter(sc.BENCH.curves))
        reference = dict(sc.BENCH.curves[first])
        assert table.get_row_at(5) == list(row_cells(sc.ROWS[5], reference if sc.ROWS[5].mode != first else None))
        done_spec = next(r for r in sc.ROWS if r.mode != first and r.status == "done" and r.concurrency in reference)
        speedup = row_cells(done_spec, reference)[4]
        assert speedup == f"{(done_spec.tok_s or 0) / reference[done_spec.concurrency]:.2f}×"
        assert table.cursor_row == 5  # the running level
        assert "client and server disagree by 14 %" in str(app.screen.query_one("#bench-notes", Label).render())
        verdict = app.screen.query_one("#bench-verdict", Label)
        assert str(verdict.render()) == f"▶ {sc.BENCH.crossover_text}"
        assert app.screen.query_one(LiveChart).border_title == "live tok/s · eagle3 C=5"


async def test_live_chart_keeps_the_last_levels(build: AppFactory) -> None:
    app, session = build(sc.ready_with_bench()[:4])
    async with app.run_test(size=SIZE) as pilot:
        from specdash.core.events import BenchTick

        session.emit(*(BenchTick("eagle3", c, 0.25, 100.0, 0, 64) for c in (1, 2, 5, 10, 20, 50)))
        await pilot.pause()
        assert [c for _, c in app.screen.query_one(LiveChart)._series] == [5, 10, 20, 50]


async def test_gpu_panel_hidden_until_stats(build: AppFactory) -> None:
    app, session = build(sc.stopped())
    async with app.run_test(size=SIZE) as pilot:
        gpus = app.screen.query_one("#gpus", GpuPanel)
        assert not gpus.display
        session.emit(sc.GPUS)
        await pilot.pause()
        assert gpus.display
        assert len(gpus.render().plain.splitlines()) == 4


@pytest.mark.parametrize("memory", [(61_000, 81_559, "60G"), (115_000, 144_384, "112G")])  # H100, H200
@pytest.mark.parametrize("size", [(100, 30), (160, 45)])
async def test_eight_gpus_fit_in_the_side_panel(
    build: AppFactory, size: tuple[int, int], memory: tuple[int, int, str]
) -> None:
    """An 8-GPU box: two GPUs per line where two fit side by side (the side column at 160 columns), else the
    summary on as many lines as the box needs (beside the modes at 100): every line fits the panel (none wraps
    into the next GPU's), and every GPU shows."""
    from specdash.core.events import GpuSample, GpuStats

    app, session = build(sc.ready_with_bench())
    async with app.run_test(size=size) as pilot:
        used, total, shown = memory
        session.emit(GpuStats(tuple(GpuSample(i, 80.0 + i, used, total, 600.0) for i in range(8))))
        await settle_screen(pilot)
        gpus = app.screen.query_one("#gpus", GpuPanel)
        width = gpus.content_size.width
        lines = gpus.render().plain.splitlines()
        assert all(len(line) <= width for line in lines), (width, lines)
        assert gpus.content_size.height >= len(lines), (lines, gpus.content_size)
        if (width - 2) // 2 >= 15:
            assert len(lines) == 4, lines
            for i in range(8):
                assert f"{i} " in lines[i // 2] and f"{80 + i:3d}% {shown}" in lines[i // 2], lines
        else:
            assert lines[0] == "▇▇▇▇▇▇▇▇ 80-87%", (width, lines)


async def test_empty_update_keeps_panel_usable(build: AppFactory) -> None:
    app, session = build(sc.ready_with_bench()[:4])
    async with app.run_test(size=SIZE) as pilot:
        session.emit(BenchUpdate(rows=(), running=True))
        await pilot.pause()
        assert app.screen.query_one("#bench-table", DataTable).row_count == 0


@pytest.mark.parametrize(
    ("text", "levels"),
    [
        ("1,2,5,10,20,50", (1, 2, 5, 10, 20, 50)),
        ("10 5, 5 1", (1, 5, 10)),
        (" 64 ", (64,)),
        ("1-64x2", (1, 2, 4, 8, 16, 32, 64)),
        ("1-4", (1, 2, 3, 4)),
        ("3-100x3, 1", (1, 3, 9, 27, 81)),
        ("1-1024x2", tuple(2**i for i in range(11))),
    ],
)
def test_parse_levels(text: str, levels: tuple[int, ...]) -> None:
    assert parse_levels(text) == levels


@pytest.mark.parametrize(
    "text", ["", "0", "-1", "1.5", "abc", "5000", "1025", "8-2", "1-64x1", "1-64x", "1-2000x2", "1-100", "2x4", "1--4"]
)
def test_parse_levels_rejects(text: str) -> None:
    with pytest.raises(UsageError):
        parse_levels(text)


def test_nice_ticks_start_at_zero_and_cover_the_top() -> None:
    for top in (0.5, 7, 152, 1960, 2210, 23456):
        ticks, labels = nice_ticks(top)
        assert ticks[0] == 0 and ticks[-1] >= top and len(ticks) <= 6
    assert nice_ticks(1960)[1] == ["0", "500", "1k", "1.5k", "2k"]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "-"),
        (0.4, "0s"),
        (42, "42s"),
        (185, "3m 05s"),
        (3725, "1h 02m"),
        (47 * 3600, "47h 00m"),
        (3 * 86400 + 4 * 3600, "3d 04h"),
    ],
)
def test_duration(seconds: float | None, text: str) -> None:
    from specdash.ui.format import duration

    assert duration(seconds) == text


@pytest.mark.parametrize(
    "ticks",
    [
        [BenchTick("eagle3", 1, 0.0, 0.0, 0, 64)],  # the first tick of a level: one point, zero tok/s
        [BenchTick("eagle3", 1, 0.25, 0.0, 0, 64), BenchTick("eagle3", 1, 0.5, 0.0, 0, 64)],
        [BenchTick("eagle3", 1, 0.25, 120.0, 0, 64)],
    ],
)
async def test_charts_survive_degenerate_data(build: AppFactory, ticks: list[BenchTick]) -> None:
    app, session = build(sc.ready_with_bench()[:4])
    async with app.run_test(size=SIZE) as pilot:
        session.emit(*ticks, BenchUpdate(rows=(), curves={"eagle3": ((1, 0.0),)}, running=True))
        await pilot.pause()
        for chart in (app.screen.query_one(LiveChart), app.screen.query_one(CurvesChart)):
            assert "chart unavailable" not in str(chart.render())
        session.emit(BenchUpdate(rows=(), curves={"eagle3": ((1, 300.0),), "baseline": ((1, 200.0),)}, crossover=1.0))
        await pilot.pause()
        assert "chart unavailable" not in str(app.screen.query_one(CurvesChart).render())


async def test_live_chart_colours_stay_distinct_and_time_bounded_levels_say_so(build: AppFactory) -> None:
    app, session = build(sc.ready_with_bench()[:4])
    async with app.run_test(size=SIZE) as pilot:
        from specdash.core.events import BenchTick

        chart = app.screen.query_one(LiveChart)
        session.emit(*(BenchTick("eagle3", c, 3.0, 100.0, 48, 0) for c in (1, 2, 5, 10, 20, 50)))
        await pilot.pause()
        slots = [chart._slot[key] for key in chart._series]
        assert len(set(slots)) == len(slots) == 4
        colours = chart.colours()
        assert len({colours[i % len(colours)] for i in slots}) == 4
        assert chart.border_subtitle == "48 requests done · 3 s"


async def test_p_cycles_the_curves_chart(build: AppFactory) -> None:
    app, session = build(sc.ready_with_bench()[:4])
    async with app.run_test(size=SIZE) as pilot:
        session.emit(sc.BENCH)
        await pilot.pause()
        chart = app.screen.query_one(CurvesChart)
        for expected in ("speedup", "Pareto", "tok/s by concurrency"):
            await pilot.press("p")
            await pilot.pause()
            assert str(chart.border_title).startswith(expected)
            assert "chart unavailable" not in str(chart.render())


def test_notes_raise_the_acceptance_alarm_for_a_mode_stuck_near_one() -> None:
    from specdash.core.events import LevelRow
    from specdash.ui.widgets.bench import notes_text

    rows = (
        LevelRow("baseline", 1, "done", tok_s=100.0),
        LevelRow("eagle", 1, "done", tok_s=90.0, accept_length=1.0),
        LevelRow("eagle", 2, "done", tok_s=150.0, accept_length=1.02),
        LevelRow("eagle3", 1, "done", tok_s=180.0, accept_length=2.9),
    )
    text = notes_text(rows)
    assert text.count("⚠") == 1 and "eagle: mean accept length stays at 1.02" in text


def test_the_acceptance_line_names_the_newest_speculative_level_and_what_the_engine_counts() -> None:
    from specdash.core.events import LevelRow
    from specdash.ui.widgets.bench import acceptance_text

    assert acceptance_text((LevelRow("plain", 1, "done", tok_s=100.0),)) == ""  # nothing speculative: no line
    rows = (
        LevelRow("ngram", 1, "done", tok_s=90.0, accept_length=2.4, draft_share=0.58, accept_per_position=(0.8, 0.5)),
        LevelRow("ngram", 4, "done", tok_s=150.0, accept_length=1.9, draft_share=0.47, accept_per_position=(0.6, 0.3)),
        LevelRow("ngram", 16, "running", tok_s=160.0, accept_length=1.5),
    )
    text = acceptance_text(rows)
    assert text.startswith("acceptance · ngram C=4: 1.90 tokens per verify step"), text  # done levels only
    assert "47 % of output from drafts" in text and "by draft position 0.60 0.30" in text
    # SGLang reports only the mean: the line says that much and no more.
    sglang = acceptance_text((LevelRow("eagle3", 1, "done", tok_s=300.0, accept_length=3.05),))
    assert sglang == "acceptance · eagle3 C=1: 3.05 tokens per verify step"


async def _sweep_page_charts(pilot: Pilot[None], size: tuple[int, int]) -> tuple[Region, Region]:
    """Show the sweep page (its own page below 150 columns); the regions of the charts (or, under 34 rows,
    of the crossover strip that stands for them) and of the footer, once the charts are checked to keep their
    8 rows above the footer (the strip its line)."""
    if size[0] < 150:
        await pilot.press("v")
    await settle_screen(pilot)
    footer = pilot.app.screen.query_one("Footer").region
    if size[1] < 34:
        assert not pilot.app.screen.query_one("#bench-charts").display
        strip = pilot.app.screen.query_one("#bench-strip").region
        assert strip.height >= 1 and strip.bottom <= footer.y, (strip, footer)
        return strip, footer
    charts = pilot.app.screen.query_one("#bench-charts").region
    assert charts.height >= 8 and charts.bottom <= footer.y, (charts, footer)
    return charts, footer


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 45)])
async def test_many_notes_leave_the_charts_their_rows(build: AppFactory, size: tuple[int, int]) -> None:
    app, _ = build(sc.ready_with_many_notes())
    async with app.run_test(size=size) as pilot:
        charts, footer = await _sweep_page_charts(pilot, size)
        screen = app.screen
        lines = screen.query_one(BenchLines)
        hint = lines.hint
        # 7 lines under the table: every one fits (at 80x24 because the strip stands for the charts).
        assert not hint.display, "every line fits"


@pytest.mark.parametrize("size", [(60, 34)])
async def test_lines_out_of_view_are_announced_and_scroll(build: AppFactory, size: tuple[int, int]) -> None:
    """Where the charts keep their 8 rows and the lines do not all fit, the hint says how many are out of
    view; tab focuses them, j scrolls to the last, and nothing else moves."""
    from dataclasses import replace

    from specdash.core.events import BenchUpdate

    # Twice the notes of `ready_with_many_notes`: more than the lines' share of a 34-row sweep page.
    rows = tuple(replace(r, concurrency=r.concurrency + 100 * k) for k in range(2) for r in sc.NOTES_ROWS)
    events = [e if not isinstance(e, BenchUpdate) else replace(e, rows=rows) for e in sc.ready_with_many_notes()]
    app, _ = build(events)
    async with app.run_test(size=size) as pilot:
        charts, _footer = await _sweep_page_charts(pilot, size)
        screen = app.screen
        lines = screen.query_one(BenchLines)
        hint = lines.hint
        assert hint.display and str(hint.render()).startswith("▼ "), hint.render()
        hidden = int(str(hint.render()).split()[1])
        await pilot.press("tab")
        assert screen.focused is lines
        await pilot.press(*"j" * (hidden + 1))
        await settle_screen(pilot)
        assert str(hint.render()).startswith(f"▲ {hidden} line"), hint.render()
        assert screen.query_one("#bench-charts").region == charts, "scrolling moves nothing else"


def test_the_gpu_summary_line_shows_every_gpu_and_the_spread() -> None:
    from specdash.core.events import GpuSample
    from specdash.ui.widgets.gpu import gpu_summary

    gpus = tuple(GpuSample(i, u, 61_000 + 800 * i, 81_920, 310.0 + i) for i, u in enumerate((90, 88, 0, 89)))
    assert gpu_summary(gpus) == "GPUs ▇▇▁▇ 0-90% 59.6-61.9/80G 310-313W"
    same = tuple(GpuSample(i, 50.0, 40_960, 81_920) for i in range(2))
    assert gpu_summary(same) == "GPUs ▅▅ 50% 40.0/80G"


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 45)])
async def test_eight_gpus_leave_the_sweep_pages_charts_their_rows(build: AppFactory, size: tuple[int, int]) -> None:
    """On the stacked sweep page of a small terminal the GPUs come as one summary line under the charts, so an
    8-GPU box with many notes still leaves the charts their 8 rows; nothing of the GPUs is lost where there is
    room (the side panel's lines)."""
    from specdash.core.events import GpuSample, GpuStats

    app, session = build(sc.ready_with_many_notes())
    async with app.run_test(size=size) as pilot:
        session.emit(GpuStats(tuple(GpuSample(i, 80.0 + i, 61_000, 81_559, 600.0) for i in range(8))))
        charts, footer = await _sweep_page_charts(pilot, size)
        docked = app.screen.query_one("#gpus-bench", GpuPanel)
        if docked.display:
            assert docked.render().plain == "GPUs ▇▇▇▇▇▇▇▇ 80-87% 59.6/80G 600W"
            assert docked.region.height == 1 and docked.region.bottom <= footer.y, (docked.region, footer)
            assert charts.bottom <= docked.region.y, (charts, docked.region)


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 45)])
async def test_a_short_terminal_gets_the_crossover_strip_and_every_level_instead_of_unreadable_charts(
    build: AppFactory, size: tuple[int, int]
) -> None:
    """Under 34 rows a chart had 2 plot rows (legend over the points, 200 tok/s on the 0 line): the strip says
    what it would (speedup per level, the crossover C), the table shows every level (one row per C, the modes
    side by side), and `p` says why it
    does nothing. From 34 rows the charts are back."""
    app, _ = build(sc.ready_with_bench())
    notices = record_notices(app)
    async with app.run_test(size=size) as pilot:
        await _sweep_page_charts(pilot, size)
        screen = app.screen
        strip = screen.query_one("#bench-strip", Label)
        table = screen.query_one(BenchTable)
        if size[1] >= 34:
            assert not strip.display and screen.query_one(CurvesChart).content_size.height >= 10
            return
        assert str(strip.render()) == "eagle3/baseline  C=1 2.44×  C=5 2.03×  C=20 0.86×  · crossover C≈12.5"
        assert table.row_count == 3 and table.scrollable_content_region.height >= 4  # header + one row per C
        await pilot.press("p")
        await settle_screen(pilot)
        assert any("The charts need 34 rows" in n.message for n in notices)


async def test_y_copies_the_sweep_as_markdown(build: AppFactory) -> None:
    """`y` puts the verdict and one row per C (modes side by side, the speedup) on the clipboard (OSC 52)."""
    app, _ = build(sc.ready_with_bench())
    notices = record_notices(app)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        text = app.clipboard
        assert text.startswith("### specdash sweep on root@gpu-box\n\n**eagle3 wins up to C=12.5; baseline above**")
        assert "| C | baseline tok/s | eagle3 tok/s | eagle3 speedup |" in text
        assert "| 1 | 152 | 371 | 2.44× |" in text and "| 20 | 2,210 | 1,905 | 0.86× |" in text
        assert any("Copied the sweep and its policy" in n.message for n in notices)


async def test_y_copies_what_the_verdict_means_in_the_engines_flags(build: AppFactory) -> None:
    """After an A/B, `y` also copies the policy: which mode at which load, and the eagle3 mode's own launch
    flags in each form the engine takes (fixed; dynamic: SGLang's adaptive tiers); the notice says so."""
    app, _ = build(sc.ready_with_bench())
    notices = record_notices(app)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        text = app.clipboard
        assert text.index("### specdash sweep on root@gpu-box") < text.index("#### The policy: eagle3 or baseline")
        assert "- C = 1..16 running requests: **eagle3**" in text
        assert "- C = 17 and above running requests: **baseline**" in text
        flags = "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"
        assert f"```sh\n--speculative-algorithm EAGLE3 {flags}\n```" in text
        assert '"17": {"candidate_steps": [0]}' in text and "--speculative-adaptive-config adaptive.json" in text
        said = [n.message for n in notices]
        assert any("Copied the sweep and its policy in the engine's flags" in n for n in said), said


async def test_y_after_a_single_mode_sweep_says_there_is_no_policy(build: AppFactory) -> None:
    update = BenchUpdate(rows=sc.ROWS[:3], curves={"baseline": sc.BENCH.curves["baseline"]}, running=False)
    app, _ = build([*sc.ready_with_bench()[:4], update])
    notices = record_notices(app)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        assert "#### The policy" not in app.clipboard and "| 20 | 2,210 |" in app.clipboard
        said = [n.message for n in notices]
        assert any("no policy: it needs two modes measured, an A/B" in n for n in said), said
