"""Engines by name, and telling which engine wrote a log."""

from __future__ import annotations

from collections.abc import Iterable

from specdash.engines.base import EngineRules
from specdash.engines.sglang import SGLangRules
from specdash.engines.vllm import VLLMRules

ENGINES: dict[str, type[EngineRules]] = {"sglang": SGLangRules, "vllm": VLLMRules}
"""Every engine we know, by the name used in config files and on the command line."""

# Substrings only one engine prints; each hit is one vote. Generic lines (shard bars, uvicorn) vote for none.
_VOTES: dict[str, tuple[str, ...]] = {
    "sglang": (
        " TP0]",
        " TP1]",
        "Load weight begin",
        "Load weight end",
        "Decode batch",
        "Prefill batch",
        "Capturing batches (bs=",
        "cuda graph",
        "fired up and ready to roll",
        "Scheduler hit an exception",
        "server_args=ServerArgs",
        "sglang",
        "max_total_num_tokens=",
        "Memory pool end",
    ),
    "vllm": (
        "pid=",
        "(APIServer",
        "EngineCore",
        "vLLM",
        "vllm",
        "Engine 000:",
        "Capturing CUDA graphs (",
        "SpecDecoding metrics",
        "non-default args",
        "Available routes are",
        "Loading weights took",
    ),
}


def make_rules(name: str) -> EngineRules:
    """A fresh rules object for one log stream of the named engine.

    Raises:
        KeyError: for an unknown engine name.
    """
    return ENGINES[name]()


def detect_engine(lines: Iterable[str], *, default: str = "sglang", max_lines: int = 2000) -> str:
    """Guess which engine wrote these lines by counting engine-specific substrings.

    Args:
        lines: Raw log lines (only the first `max_lines` are read).
        default: The answer when nothing votes (SGLang is the first target).
        max_lines: How far to look.

    Returns:
        An engine name from `ENGINES`.
    """
    votes = dict.fromkeys(_VOTES, 0)
    for count, line in enumerate(lines):
        if count >= max_lines:
            break
        for name, needles in _VOTES.items():
            votes[name] += sum(1 for needle in needles if needle in line)
    best = max(votes.values())
    if best == 0:
        return default
    winners = [name for name, score in votes.items() if score == best]
    return default if default in winners else winners[0]
