"""Which progress bar a log line draws, if any: the one question the log view needs to fold a bar's redraws.

A tqdm bar (shard loading, graph capture, vLLM's bars) redraws with `\\r`, and every redraw reaches us as a
line of its own: a 64-shard load is 64 lines. A terminal shows one line that updates; so does the log
view, keyed on what `bar_line` says. Pure and cheap: it runs on every log line, so it looks for `%` and
`|` before it reaches for a regular expression.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# `desc:  45%|████▌ | 29/64 [...]`, `desc:  45% Completed | 29/64 [...]` (SGLang's shard bar).
_BAR = re.compile(r"(\d{1,3})%\s*(?:Completed\s*)?\|(?:[^|]{0,400}\|)?\s*(\d+)/(\d+)\s*(?:\[|$)")
# Words that tell two bars with the same description apart: the rank (`TP1`) or the process (`pid=42`).
_OWNER = re.compile(r"\b(?:DP|TP|PP|EP)\d+\b|\bpid=\d+")
# A leading timestamp or bracket prefix (`[2025-04-16 14:21:49 TP0] `, `INFO 04-16 14:22:53 [x.py:1] `).
_PREFIX = re.compile(r"^\s*(?:\([^)]{0,80}\)\s*)?(?:\[[^\]]{0,80}\]\s*)?(?:[A-Z]+\s+\d\d-\d\d \d\d:\d\d:\d\d\s*)?")
_DIGITS = re.compile(r"\d+(?:\.\d+)?")
# A line that is a process tag and nothing else: `(EngineCore pid=3343) ` before a bar's `\r` (vLLM, Ray).
_TAG_ONLY = re.compile(r"^\s*\([^()]{1,80}\)\s*$")


@dataclass(frozen=True, slots=True)
class BarLine:
    """One redraw of a progress bar."""

    key: str
    """Which bar: its description with the numbers that change between redraws (`bs=160`, `avail_mem=20.5
    GB`) blanked, and the rank or process that draws it. Two redraws of one bar have the same key."""
    done: int
    """Steps done (`29` in `29/64`)."""
    total: int
    """Steps in all (`64` in `29/64`)."""


def bar_line(text: str) -> BarLine | None:
    """The progress bar `text` (a cleaned log line) draws, or None for any other line.

    A bar is a percentage followed by `|` and a `n/N` count, as tqdm draws it; a line that merely mentions a
    percentage is not one. A new bar with the same description (the draft model's shards after the target's)
    has the same key: the caller tells them apart by the count going back (`BarLine.done`).
    """
    if "%" not in text or "|" not in text:
        return None
    found = _BAR.search(text)
    if found is None:
        return None
    done, total = int(found.group(2)), int(found.group(3))
    if done > total:
        return None
    head = text[: found.start()]
    owners = " ".join(_OWNER.findall(head))
    prefix = _PREFIX.match(head)  # always matches (every part is optional), maybe empty
    desc = _DIGITS.sub("#", head[prefix.end() if prefix else 0 :]).strip().rstrip(":").strip()
    return BarLine(f"{owners}|{desc}", done, total)


def tag_only(text: str) -> bool:
    """True for a line that is only a process tag (`(EngineCore pid=3343) `).

    vLLM tags each write of a child process, and a tqdm bar starts its write with `\\r`: the tag is left on a
    line of its own and the bar, on the next, has none. A view puts the tag back in front of the bar.
    """
    return "(" in text and _TAG_ONLY.match(text) is not None
