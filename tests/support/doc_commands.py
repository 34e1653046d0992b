"""The `specdash ...` commands README.md and docs/*.md show, where each is shown.

Commands come from the fenced code blocks (one per line, an optional `$ ` prompt and `# comment`) and from
the inline code spans of the text that are not a usage synopsis (`RUN...`, `[--json]`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

OFFLINE = {"config", "runs", "compare", "report", "export", "replay"}
"""Subcommands that need no host."""


class DocCommand(NamedTuple):
    where: str
    """`page:line`."""
    argv: list[str]
    """After `specdash`."""
    fenced: bool
    """From a code block; else from an inline code span in the text."""


def _fenced_lines(text: str) -> Iterator[tuple[int, str]]:
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            fence = None if fence is not None else stripped
            continue
        if fence is not None:
            yield number, stripped


def doc_commands(pages: list[Path] = DOCS) -> list[DocCommand]:
    """Every command the pages show, in page order and line order."""
    found = []
    for path in pages:
        text = path.read_text(encoding="utf-8")
        fenced = dict(_fenced_lines(text))
        for number, line in enumerate(text.splitlines(), 1):
            where = f"{path.relative_to(ROOT)}:{number}"
            if number in fenced:
                line = fenced[number].removeprefix("$ ")
                if line.startswith("specdash "):
                    found.append(DocCommand(where, shlex.split(line, comments=True)[1:], True))
                continue
            for span in re.findall(r"`(specdash [^`]+)`", line):
                if "..." not in span and "[" not in span:  # not a usage synopsis (`RUN...`, `[--json]`)
                    found.append(DocCommand(where, shlex.split(span)[1:], False))
    return found
