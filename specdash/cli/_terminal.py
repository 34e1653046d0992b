"""Printing for a terminal or a pipe: the table width to fit, and the one updating line."""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from typing import TextIO


def table_width(out: TextIO | None = None) -> int | None:
    """The width a table printed to `out` must fit: `$COLUMNS` when set, else the terminal's; None (every
    column) when `out` is a pipe or a file, where scripts read it."""
    out = out or sys.stdout  # at call time: a test or a caller may have replaced it since import
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return shutil.get_terminal_size().columns if out.isatty() else None


class LiveLine:
    """Lines for a terminal or a pipe: on a terminal, `update` rewrites one line in place (cut to the
    terminal's width) and `line` prints a lasting line above it; piped, every update is a plain line, so a
    log keeps the whole story."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.tty = out.isatty()
        self._shown = False

    def update(self, text: str) -> None:
        """The live line now says `text`."""
        if not self.tty:
            self.line(text)
            return
        width = shutil.get_terminal_size().columns
        self.out.write("\r" + text[: max(width - 1, 10)] + "\x1b[K")
        self.out.flush()
        self._shown = True

    def line(self, text: str) -> None:
        """A line that stays (it replaces the live line on a terminal; the next `update` starts a new one)."""
        if self._shown:
            self.out.write("\r\x1b[K")
            self._shown = False
        if self.tty:  # it fits the terminal, continuation lines indented (a pipe keeps the line whole)
            text = textwrap.fill(text, width=shutil.get_terminal_size().columns, subsequent_indent="    ")
        self.out.write(text + "\n")
        self.out.flush()
