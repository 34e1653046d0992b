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


def test_empty_line_before_a_carriage_return_is_kept() -> None:
    # SGLang prints "\n" then a tqdm bar starting with "\r": an empty line sits between them.
    assert split_lines("GB\n\rbar 1\rbar 2\n") == ["GB", "", "bar 1", "bar 2"]
    assert split_lines("GB\n\r") == ["GB", ""]
    s = LineSplitter()
    assert s.feed("GB\n\r") == ["GB"]
    assert s.flush() == [""]


def test_any_chunking_gives_the_whole_text_split() -> None:
    text = "a\r\nb\n\rc\rd\n\ne\r"
    whole = split_lines(text)
    for cut in range(len(text) + 1):
        s = LineSplitter()
        got = s.feed(text[:cut]) + s.feed(text[cut:]) + s.flush()
        assert got == whole, cut


def test_following_by_byte_offset_loses_and_repeats_nothing() -> None:
    import random

    from specdash.core.lines import complete_length

    data = (
        b"[ts TP0] Capture cuda graph begin.\n\rCapturing batches (bs=48):   0%|\rCapturing (bs=40):  10%|\xe2\x96\x88|"
        b"\r\n[ts TP1] end\r\n\r\n\xff\xfe bad utf8\nlast\r"
    ) * 20
    want = split_lines(data.decode("utf-8", "replace"))
    rng = random.Random(0)
    for _ in range(300):
        got: list[str] = []
        pending, i = b"", 0
        while i < len(data):
            step = rng.randint(1, 40)
            pending += data[i : i + step]
            i += step
            n = complete_length(pending)
            got += split_lines(pending[:n].decode("utf-8", "replace"))
            pending = pending[n:]
        got += split_lines(pending.decode("utf-8", "replace"))
        assert got == want
