"""What a log line is, for the log view: its tint (error, warning, traceback, ready) and the spans to tint.

The kind of a line is decided once, by the startup tracker that read it (`core.startup`: one split, one
colour-code clean, the same rules that drive the phases and crashes): a `LogBatch` carries the tracker's
`ClassifiedLine`s only, so the view never reads a line a second way. The spans below only place colours
inside a line already classified.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum

from specdash.core.startup_events import ClassifiedLine, LineKind


class Kind(IntEnum):
    """How a whole line is tinted; the filter keeps every kind above NORMAL except READY."""

    NORMAL = 0
    READY = 1
    WARNING = 2
    ERROR = 3
    TRACEBACK = 4


_TINT = {
    LineKind.NORMAL: Kind.NORMAL,
    LineKind.PROGRESS: Kind.NORMAL,
    LineKind.SERVING: Kind.NORMAL,
    LineKind.READY: Kind.READY,
    LineKind.WARNING: Kind.WARNING,
    LineKind.STOP: Kind.WARNING,
    LineKind.ERROR: Kind.ERROR,
    LineKind.CRASH: Kind.ERROR,
    LineKind.TRACEBACK: Kind.TRACEBACK,
}
"""The tint of each kind the tracker gives."""

# `[2025-04-16 14:22:53 TP3]`, `[... DP3 TP3]`: the rank words inside SGLang's leading bracket;
# `(EngineCore_DP0 pid=188893)`, `(VllmWorker TP1 pid=42)`: vLLM's whole process tag.
_PREFIX = re.compile(r"^\[[^\]]{0,60}\]")
_RANK_WORD = re.compile(r"\b(?:DP|TP|PP|EP)\d+\b")
_VLLM_TAG = re.compile(r"^\((?:EngineCore|VllmWorker|Worker|APIServer)[^)]*\)")
_LEVEL = re.compile(r"\b(ERROR|CRITICAL|FATAL|WARNING|WARN)\b")
# A bracket holding only a timestamp (`[2025-04-16 14:23:31] `), or a timestamp among other words
# (`[2025-04-16 14:23:30 TP0]`, vLLM's `INFO 04-16 14:22:53 [x.py:1]`), within a line's first 80 characters.
_TIMESTAMP = re.compile(
    r"\[(?:\d{4}-\d\d-\d\d[ T])?\d\d:\d\d:\d\d(?:[.,]\d+)?\] ?"
    r"|(?:\d{4}-\d\d-\d\d[ T]|\b\d\d-\d\d )\d\d:\d\d:\d\d(?:[.,]\d+)? ?"
)


@dataclass(slots=True)
class LogLine:
    """One cleaned line and its kind."""

    seq: int
    """A running number: identifies the line in render caches (ids of dropped objects get reused)."""
    text: str
    kind: Kind
    line_kind: LineKind = LineKind.NORMAL
    """The tracker's kind (finer than the tint: progress, serving, crash, stop)."""
    bar: str | None = None
    """For a progress-bar line, the bar's identity: consecutive lines with the same `bar` redraw one bar."""


def view_line(seq: int, line: ClassifiedLine) -> LogLine:
    """Line number `seq` of the view, as the session's tracker read it (tabs expanded, tinted by its kind)."""
    return LogLine(seq, line.text.expandtabs(), _TINT[line.kind], line.kind, line.bar)


def prefix_span(text: str) -> tuple[int, int] | None:
    """Where SGLang's `[timestamp TPn]` prefix is (dimmed, so the message stands out)."""
    m = _PREFIX.match(text) if text.startswith("[") else None
    return m.span() if m else None


def rank_spans(text: str) -> list[tuple[int, int]]:
    """Where the TP/DP rank words and vLLM's engine-process tag are, as (start, end) offsets."""
    if text.startswith("("):
        m = _VLLM_TAG.match(text)
        return [m.span()] if m else []
    prefix = prefix_span(text)
    if prefix is None or "P" not in text[: prefix[1]]:
        return []
    return [m.span() for m in _RANK_WORD.finditer(text, 0, prefix[1])]


def level_spans(text: str) -> list[tuple[int, int, bool]]:
    """Where ERROR/WARNING words are, as (start, end, is_error)."""
    if "ERR" not in text and "WARN" not in text and "CRIT" not in text and "FATAL" not in text:
        return []
    return [(m.start(), m.end(), not m.group(1).startswith("WARN")) for m in _LEVEL.finditer(text)]


def match_spans(text: str, needle: str) -> list[tuple[int, int]]:
    """Case-insensitive occurrences of `needle` in `text`."""
    if not needle:
        return []
    low, n = text.lower(), needle.lower()
    spans, start = [], low.find(n)
    while start != -1:
        spans.append((start, start + len(n)))
        start = low.find(n, start + len(n))
    return spans


def timestamp_span(text: str) -> tuple[int, int] | None:
    """Where the line's timestamp is (with its trailing space), for the view's timestamps-off mode.

    A bracket that holds nothing else goes whole (`[2025-04-16 14:23:31] `); in `[2025-04-16 14:23:30 TP0]`
    only the time goes, so the rank stays. Only the first 80 characters are searched: a time later in the
    line is part of the message.
    """
    if ":" not in text[:80]:
        return None
    m = _TIMESTAMP.search(text, 0, 80)
    return m.span() if m else None
