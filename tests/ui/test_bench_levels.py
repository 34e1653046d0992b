"""The sweep table by terminal size: one row per concurrency with the modes side by side where the crossover
strip stands for the charts (under 34 rows), one row per (mode, C) with every figure from 34 rows up; at
every size the running level stays in view as the sweep advances."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable

from specdash.ui.widgets.bench import BenchTable
from tests.support import scenarios as sc
from tests.support.settle import settle_screen
from tests.ui.conftest import AppFactory

SIZES = [(80, 24), (100, 30), (160, 45)]
RUNNING = 10
"""eagle3's level number 10 (C=32) runs: ten levels of it done, every baseline level done."""


def _labels(table: DataTable[str]) -> list[str]:
    return [str(column.label) for column in table.ordered_columns]


def _row_in_view(table: DataTable[str], key: str) -> bool:
    index = table.get_row_index(key)
    top = round(table.scroll_y)
    rows = table.scrollable_content_region.height - table.header_height
    return top <= index < top + rows


@pytest.mark.parametrize("size", SIZES)
async def test_the_table_follows_the_running_level_and_puts_the_modes_side_by_side_where_charts_cannot_be_read(
    build: AppFactory, size: tuple[int, int]
) -> None:
    app, session = build(sc.ready_with_bench()[:6])
    async with app.run_test(size=size) as pilot:
        if size[0] < 150:
            await pilot.press("v")
        await settle_screen(pilot)
        for running in range(RUNNING + 1):  # the sweep advances level by level
            session.emit(sc.many_levels_ab(running))
            await settle_screen(pilot)
        table = app.screen.query_one(BenchTable)
        # Nothing cut off: every column fits the table's width (no sideways scrolling to read a figure).
        assert table.virtual_size.width <= table.scrollable_content_region.width, (table.virtual_size, table.size)
        if size[1] < 34:
            assert _labels(table) == ["", "C", "baseline tok/s", "eagle3 tok/s", "×", "accept"]
            assert table.row_count == len(sc.MANY_LEVELS)
            assert table.get_row("1") == ["✓", "1", "150", "370", "2.47×", "3.20"]
            assert table.get_row("32") == ["▶", "32", "2,854", "2,668", "", "2.70"]
            assert table.get_row("48") == ["·", "48", "4,029", "·", "", "-"]
            assert _row_in_view(table, "32"), (table.scroll_y, table.size)
        else:
            assert _labels(table)[:4] == ["", "mode", "C", "tok/s"]
            assert table.row_count == 2 * len(sc.MANY_LEVELS)
            assert _row_in_view(table, "eagle3@32"), (table.scroll_y, table.size)
