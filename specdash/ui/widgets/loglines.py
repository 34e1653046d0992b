"""What a log line is, for the log view: its kind (error, warning, traceback, ready) and the spans to tint.

Pure functions over plain strings, called once per line as it arrives (10,000 lines/s must stay cheap), so
every check looks for a plain substring before it reaches for a regular expression.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum

from specdash.engines.text import TRACEBACK, exception_line, strip_ansi


class Kind(IntEnum):
    """How a whole line is tinted; the filter keeps every kind above NORMAL except READY."""

    NORMAL = 0
    READY = 1
    WARNING = 2
    ERROR = 3
    TRACEBACK = 4


READY_MARKERS = ("The server is fired up and ready to roll!", "Application startup complete.")
"""SGLang's and vLLM's ready lines."""

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


class Classifier:
    """Turns raw lines into `LogLine`s; remembers whether it is inside a traceback across batches."""

    def __init__(self) -> None:
        self._in_traceback = False
        self._seq = 0

    def reset(self) -> None:
        """Forget traceback state (a new run starts)."""
        self._in_traceback = False

    def feed(self, raw: str) -> LogLine:
        """Clean one raw line (ANSI codes stripped, tabs expanded) and classify it."""
        text = strip_ansi(raw).expandtabs().rstrip("\r\n")
        self._seq += 1
        return LogLine(self._seq, text, self._kind(text))

    def _kind(self, text: str) -> Kind:
        if TRACEBACK in text:
            self._in_traceback = True
            return Kind.TRACEBACK
        if self._in_traceback:
            # Frames are indented; the exception line ends the traceback (`RuntimeError: ...`).
            if text.startswith((" ", "\t")) or not text:
                return Kind.TRACEBACK
            self._in_traceback = False
            if exception_line(text) or text.startswith(("During handling", "The above exception")):
                self._in_traceback = text.startswith(("During handling", "The above exception"))
                return Kind.TRACEBACK
        # Plain `in` tests, no generators: this runs for every line at 10,000 lines/s.
        if "ERROR" in text or "CRITICAL" in text or "FATAL" in text or exception_line(text):
            return Kind.ERROR
        if "WARN" in text and ("WARNING" in text or "WARN " in text):
            return Kind.WARNING
        if "ready to roll" in text or "startup complete" in text:
            return Kind.READY if any(marker in text for marker in READY_MARKERS) else Kind.NORMAL
        return Kind.NORMAL


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
