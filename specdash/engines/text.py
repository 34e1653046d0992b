"""Line cleaning and small parsers that both engines need.

Everything here is called once per log line, so each function checks a cheap substring before it runs a
regular expression: most lines have no colour, no container prefix and no progress bar.
"""

from __future__ import annotations

import calendar
import re

# Real escape sequences (CSI and OSC) and the literal caret form `^[[0;36m` that pasted logs carry
# (vllm#33756: the terminal's rendering of ESC was copied as two characters).
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|\^\[\[[0-9;]*[A-Za-z]")

# docker compose v1/v2: `llm0-1  | `, `sglang_1  | ` (sglang#8186).
_CONTAINER = re.compile(r"^[A-Za-z0-9][\w.-]*[-_]\d+\s+\| ?")

# `RuntimeError: ...`, `torch.OutOfMemoryError: ...`, a bare `AssertionError`, `KeyboardInterrupt: x`.
# Warnings are deliberately left out: `FutureWarning: ...` pairs are routine noise (engines.md 5.5).
_EXCEPTION = re.compile(
    r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Interrupt|Exit)(?::\s.*|:)?$",
)

_EXCEPTION_WORDS = ("Error", "Exception", "Interrupt", "Exit")

# tqdm's right part: `| 15/16 [00:06<00:00, ...]` (shard bars, `Capturing batches`, vLLM graph bars).
_BAR_COUNT = re.compile(r"\|\s*(\d+)/(\d+)\s*(?:\[|$)")

TRACEBACK = "Traceback (most recent call last)"
"""The first line of every Python traceback."""


def strip_ansi(line: str) -> str:
    """Remove terminal colour codes, real or pasted as `^[[...m`."""
    if "\x1b" not in line and "^[" not in line:
        return line
    return _ANSI.sub("", line)


def strip_container_prefix(line: str) -> str:
    """Remove a docker-compose `name-1  | ` prefix."""
    if "| " not in line[:80]:
        return line
    m = _CONTAINER.match(line)
    return line[m.end() :] if m else line


def pre_clean(raw: str) -> str:
    """Both of the above, and a trailing newline or whitespace dropped."""
    return strip_container_prefix(strip_ansi(raw)).rstrip()


def exception_line(text: str) -> bool:
    """True for a `SomeError: message` line, the last line of a traceback (never indented)."""
    if not text or text[0] in " \t" or not any(word in text for word in _EXCEPTION_WORDS):
        return False
    return _EXCEPTION.match(text) is not None


def bar_counts(text: str) -> tuple[int, int] | None:
    """`(n, N)` from a tqdm bar's `| n/N [...]` part, or None."""
    if "/" not in text:
        return None
    m = _BAR_COUNT.search(text)
    if m is None:
        return None
    done, total = int(m.group(1)), int(m.group(2))
    return (done, total) if 0 <= done <= total else None


def epoch_seconds(year: int, month: int, day: int, hour: int, minute: int, second: int, frac: str = "") -> float | None:
    """Seconds since 1970 for a naive log timestamp read as UTC (only differences matter to us).

    None for an impossible date (month 13 in a garbled line): a bad timestamp must not cost the line.
    """
    try:
        value = float(calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0)))
    except (ValueError, OverflowError):
        return None
    if frac:
        value += int(frac) / 10 ** len(frac)
    return value


def trim_traceback(text: str) -> str:
    """`Scheduler hit an exception: Traceback (most recent...):` -> `Scheduler hit an exception`."""
    cut = text.find(TRACEBACK)
    if cut <= 0:
        return text.strip()
    return text[:cut].rstrip(" :").strip()
