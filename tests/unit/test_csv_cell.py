"""`export.csv_cell`: CSV formula injection (issue 29 point 8, OWASP "CSV Injection")."""

from __future__ import annotations

import pytest

from specdash.bench.export import csv_cell

NEUTRALISED = [
    '=HYPERLINK("http://x","click")',
    "=1+1",
    "+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1",
    "\r=1",
    "-",
    "+",
    "-nan",
    "-inf",
    "- a list item",
]
KEPT = ["-3.5", "-1", "+2", "-1e-3", "+1E6", "-.5", "0", "ok", "HTTP 500: boom", "a=b", "", " =not first"]


@pytest.mark.parametrize("cell", NEUTRALISED)
def test_formula_cells_are_neutralised(cell: str) -> None:
    assert csv_cell(cell) == "'" + cell


@pytest.mark.parametrize("cell", KEPT)
def test_numbers_and_plain_text_are_kept(cell: str) -> None:
    assert csv_cell(cell) == cell


def test_non_text_cells_are_kept() -> None:
    assert [csv_cell(v) for v in (-3, -2.5, None, 0)] == [-3, -2.5, None, 0]
