"""Incremental splitting of a byte/text stream into lines on `\\r`, `\\n` and `\\r\\n`.

Progress bars (tqdm, SGLang's 2026 shard bar) redraw with a bare `\\r`; every redraw is a line for us.
"""

from __future__ import annotations

import re

from specdash.limits import MAX_LOG_LINE_CHARS

_BREAK = re.compile(r"\r\n|\r|\n")


class LineSplitter:
    """Feed text chunks; get back complete lines. A trailing partial line waits for the next chunk.

    A `\\r` at the very end of a chunk is held back, since the next chunk may start with `\\n` (one break).
    `max_line` bounds memory: a line longer than that is cut and emitted in pieces.
    """

    def __init__(self, max_line: int = MAX_LOG_LINE_CHARS) -> None:
        self._pending = ""
        self._max_line = max_line

    def feed(self, chunk: str) -> list[str]:
        """Add a chunk and return the lines it completed."""
        text = self._pending + chunk
        if text.endswith("\r"):
            text, hold = text[:-1], "\r"
        else:
            hold = ""
        parts = _BREAK.split(text)
        rest = parts.pop() + hold
        size = self._max_line
        out: list[str] = []
        for part in parts:  # a line longer than `max_line` is cut into pieces, in one pass (linear in its length)
            out.extend([part] if len(part) <= size else (part[at : at + size] for at in range(0, len(part), size)))
        cut = (len(rest) - 1) // size * size if rest else 0  # the partial line keeps its last piece (1..size)
        out.extend(rest[at : at + size] for at in range(0, cut, size))
        self._pending = rest[cut:]
        return out

    def flush(self) -> list[str]:
        """Return the trailing partial line, if any (at end of stream)."""
        rest, self._pending = self._pending, ""
        if rest.endswith("\r"):  # a held-back break: the line before it is complete, even if empty
            return [rest[:-1]]
        return [rest] if rest else []


def split_lines(text: str) -> list[str]:
    """Split a whole text on `\\r`, `\\n` and `\\r\\n` (no trailing empty line)."""
    parts = _BREAK.split(text)
    if parts and parts[-1] == "":
        parts.pop()  # the text ended with a break: no partial line after it
    return parts


MAX_LINE_BYTES = 256 * 1024
"""`complete_length` lets a "line" longer than this through in pieces, so a file without breaks cannot eat memory."""


def complete_length(buffer: bytes) -> int:
    """How many leading bytes of `buffer` are complete lines (0 when none yet).

    Used to follow a file by byte offset: only complete lines count as read. A trailing `\r` is not
    complete yet, since the next byte may make it a `\r\n` pair.
    """
    end = len(buffer) - 1 if buffer.endswith(b"\r") else len(buffer)
    cut = max(buffer.rfind(b"\n", 0, end), buffer.rfind(b"\r", 0, end))
    if cut < 0:
        return end if end >= MAX_LINE_BYTES else 0
    return cut + 1
