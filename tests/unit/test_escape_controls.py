"""`safetext.escape_controls`: the one home for making untrusted text safe for the terminal."""

from __future__ import annotations

import json

import pytest

from specdash.engines.text import unwrap_tagged
from specdash.safetext import escape_controls, escape_controls_in


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),
        ("nul\x00 del\x7f", "nul\\x00 del\\x7f"),
        ("csi\x9b2J st\x9c", "csi\\x9b2J st\\x9c"),
        ("line\nbreak\rcr", "line\\x0abreak\\x0dcr"),
        ("bidi\u202eevil\u2066", "bidi\\u202eevil\\u2066"),
        ("sep\u2028ps", "sep\\u2028ps"),
    ],
)
def test_controls_are_shown_escaped(raw: str, shown: str) -> None:
    assert escape_controls(raw) == shown


@pytest.mark.parametrize("text", ["plain", "tab\tkept", "Größe 日本語 ✓", "nbsp\u00a0ok", ""])
def test_printable_text_is_unchanged(text: str) -> None:
    assert escape_controls(text) is text


def test_parsed_json_is_escaped_everywhere_keys_too() -> None:
    value = json.loads('{"v\\u001b": ["x\\u0007", {"k": "\\u009b", "n": 1, "f": 2.5, "b": true, "z": null}]}')
    assert escape_controls_in(value) == {"v\\x1b": ["x\\x07", {"k": "\\x9b", "n": 1, "f": 2.5, "b": True, "z": None}]}
    assert escape_controls_in("\x1b") == "\\x1b" and escape_controls_in(3) == 3


def test_deep_json_is_no_recursion_error() -> None:
    deep: list[object] = []
    inner = deep
    for _ in range(100_000):
        nxt: list[object] = []
        inner.append(nxt)
        inner = nxt
    inner.append("\x07")
    out = escape_controls_in(deep)
    for _ in range(100_000):
        out = out[0]
    assert out == ["\\x07"]


def test_log_lines_lose_colour_and_show_other_controls() -> None:
    text, _, _ = unwrap_tagged("\x1b[31mred\x1b[0m bell\x07 lone\x1b x\x9b2J")
    assert text == "red bell\\x07 lone\\x1b x\\x9b2J"


@pytest.mark.parametrize(
    "flood",
    [
        "\x00" * 5_000_000,  # a log truncated in place: a hole of NULs
        "\x07" * 5_000_000,  # a flood of BELs (took 12.5 s to replay)
        "ab\x07\x1b" * 1_250_000,  # short runs, mixed
        "\u202e\x9b" * 2_500_000,  # bidi overrides and C1, non-ASCII
    ],
    ids=["nul-hole", "bel-flood", "short-mixed-runs", "bidi-c1"],  # not the 5 MB values as test ids
)
def test_escaping_is_linear_and_bounded(flood: str) -> None:
    """Every character is escaped, whatever the mix (issue 29 point 1); a long run of one control character is
    shown once with its count, so its escaped form does not grow with it. (The time is measured in
    benchmarks/escape_cost.py, not here.)"""
    shown = escape_controls(flood)
    assert shown.isprintable()
    if len(set(flood)) == 1:
        assert shown == f"[\\x{ord(flood[0]):02x} x {len(flood)}]"
    else:
        assert len(shown) <= 6 * len(flood)
        assert shown.startswith(escape_controls(flood[:8]))


def test_a_short_run_is_escaped_char_by_char() -> None:
    assert escape_controls("\x00" * 63) == "\\x00" * 63
    assert escape_controls("x" + "\x00" * 64 + "y\x07") == "x[\\x00 x 64]y\\x07"
