"""Prompt sets: the bundled `chat` and `code` sets (JSONL package data) or a user's JSONL file.

Each line is a JSON object with a `prompt` (or `text`) string. The same set, in the same order, is sent in
every mode, and its hash is stored with each run, because acceptance length depends on content
(reference/measurement.md §5.3). The `code` set mixes coding tasks with agentic ones (tool-use plans,
reviews), which are the low-entropy prompts speculation likes; `chat` is open-ended prose.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from specdash.errors import UsageError
from specdash.limits import MAX_PROMPTS_BYTES, read_regular_file

BUNDLED = ("chat", "code")
"""Names of the prompt sets shipped with specdash."""


@dataclass(frozen=True)
class PromptSet:
    """An ordered list of prompts and its identity."""

    name: str
    """`chat`, `code` or the file path."""
    prompts: tuple[str, ...]
    """The prompts in order."""

    @property
    def sha256(self) -> str:
        """Hash of the prompts (order included), recorded with every run."""
        h = hashlib.sha256()
        for p in self.prompts:
            h.update(p.encode())
            h.update(b"\0")
        return h.hexdigest()


def _parse(text: str, origin: str) -> tuple[str, ...]:
    prompts: list[str] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError) as exc:  # RecursionError: JSON nested too deep
            raise UsageError(f"{origin}:{lineno}: not JSON ({type(exc).__name__}: {exc})") from None
        value = obj.get("prompt", obj.get("text")) if isinstance(obj, dict) else None
        if not isinstance(value, str) or not value:
            raise UsageError(f"{origin}:{lineno}: expected an object with a non-empty 'prompt' string")
        prompts.append(value)
    if not prompts:
        raise UsageError(f"{origin}: no prompts")
    return tuple(prompts)


def load_prompts(spec: str) -> PromptSet:
    """Load a bundled set by name (`chat`, `code`) or a JSONL file by path.

    Raises:
        UsageError: For an unknown name, a missing file or a malformed line.
    """
    if spec in BUNDLED:
        text = resources.files("specdash.bench.prompts").joinpath(f"{spec}.jsonl").read_text(encoding="utf-8")
        return PromptSet(spec, _parse(text, spec))
    path = Path(spec).expanduser()
    if not path.exists():
        raise UsageError(f"--prompts {spec!r}: not one of {', '.join(BUNDLED)} and not a file")
    try:
        data = read_regular_file(path, MAX_PROMPTS_BYTES, "--prompts file")
    except FileNotFoundError:
        raise UsageError(f"--prompts {spec!r}: not one of {', '.join(BUNDLED)} and not a file") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"--prompts file {path}: not UTF-8 text (byte {exc.start}); expected JSONL") from None
    if "\0" in text:
        raise UsageError(f"--prompts file {path}: contains NUL bytes (a binary file?); expected JSONL")
    return PromptSet(str(path), _parse(text, str(path)))
