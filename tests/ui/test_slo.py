"""The sweep panel with an SLO (`[bench] slo`): per level attainment and goodput columns, the verdict's
largest C per mode and crossover under the SLO, readable at 80 columns; no SLO columns without one."""

from __future__ import annotations

from textual.widgets import DataTable, Label

from specdash.ui.widgets.bench import COLUMNS, SLO_COLUMNS, level_columns
from tests.support import scenarios as sc
from tests.ui.conftest import AppFactory


def headers(table: DataTable[str]) -> list[str]:
    return [str(column.label) for column in table.columns.values()]


async def test_slo_columns_and_verdict_at_80_columns(build: AppFactory) -> None:
    """At 80x24 the table has one row per C with the modes side by side: the SLO column gives each mode's
    attainment in the order of the tok/s columns (the goodput is in the verdict)."""
    app, _session = build(sc.ready_with_slo())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("v")
        await pilot.pause()
        table = app.screen.query_one("#bench-table", DataTable)
        assert headers(table) == list(level_columns(["baseline", "eagle3"], slo=True))
        cells = {str(table.get_row_at(i)[1]): table.get_row_at(i) for i in range(table.row_count)}
        assert cells["1"][-1].startswith("✓100% / ")
        assert cells["20"][-1] == "✗62% / ✗31%"  # baseline 40/64 within both limits (misses ttft_p90)
        # Every column fits in the table at 80 columns: nothing scrolls out of view sideways.
        assert (
            sum(column.get_render_width(table) for column in table.columns.values())
            <= table.scrollable_content_region.width
        )
        verdict = str(app.screen.query_one("#bench-verdict", Label).render())
        assert "Under the SLO (ttft_p90≤500ms, tpot_p90≤50ms): baseline up to C=5, eagle3 up to C=5" in verdict
        assert "in goodput" in verdict and verdict.endswith(".")


async def test_slo_and_goodput_columns_per_mode_and_level_at_160_columns(build: AppFactory) -> None:
    app, _session = build(sc.ready_with_slo())
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause()
        table = app.screen.query_one("#bench-table", DataTable)
        assert headers(table) == [*COLUMNS, *SLO_COLUMNS]
        cells = {(str(table.get_row_at(i)[1]), str(table.get_row_at(i)[2])): table.get_row_at(i) for i in range(6)}
        assert cells[("baseline", "1")][-2:] == ["✓100%", "819"]
        assert cells[("baseline", "20")][-2:] == ["✗62%", "512"]  # 40/64 within both limits; misses ttft_p90
        assert cells[("eagle3", "20")][-2:] == ["✗31%", "256"]


async def test_no_slo_no_slo_columns(build: AppFactory) -> None:
    app, session = build(sc.ready_with_bench())
    async with app.run_test(size=(160, 45)) as pilot:
        table = app.screen.query_one("#bench-table", DataTable)
        assert headers(table) == list(COLUMNS)
        session.emit(sc.bench_with_slo())  # the next sweep has an SLO: the columns come ...
        await pilot.pause()
        assert headers(table) == [*COLUMNS, *SLO_COLUMNS]
        session.emit(sc.BENCH)  # ... and go with it
        await pilot.pause()
        assert headers(table) == list(COLUMNS) and table.row_count == 6
