from __future__ import annotations

import pytest

from specdash.core.lines import LineSplitter, split_lines


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        (["a\nb\n"], ["a", "b"]),
        (["a\r\nb"], ["a", "b"]),
        (["50%\r", "\n60%\r70%\n"], ["50%", "60%", "70%"]),
        (["bar 1\rbar 2\rdone\n"], ["bar 1", "bar 2", "done"]),
        (["par", "tial\n"], ["partial"]),
        (["x\r", "y\n"], ["x", "y"]),
        (["\n\n"], ["", ""]),
    ],
)
def test_splitter(chunks: list[str], expected: list[str]) -> None:
    s = LineSplitter()
    out: list[str] = []
    for c in chunks:
        out += s.feed(c)
    out += s.flush()
    assert out == expected


def test_long_line_is_bounded() -> None:
    s = LineSplitter(max_line=10)
    out = s.feed("a" * 25)
    assert out == ["a" * 10, "a" * 10]
    assert s.flush() == ["a" * 5]


def test_split_lines() -> None:
    assert split_lines("a\rb\r\nc") == ["a", "b", "c"]
