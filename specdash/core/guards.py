"""Checks before a sweep that catch measurements which would mislead (pure).

- A level above the server's CUDA-graph batch limit (SGLang `--cuda-graph-max-bs`, vLLM
  `--max-cudagraph-capture-size`) measures eager decode, a slower path than the levels below it
  (InferenceX found a sweep whose top level did this).
- A level above the server's running-request cap (SGLang `--max-running-requests`, vLLM `--max-num-seqs`)
  measures queueing: the extra requests wait, and the wait shows up as TTFT.
- Random-token prompts with a speculative mode: drafts rarely match random text, so acceptance reads low
  and the speculative mode looks worse than it is on real traffic. Natural-language (and code-request)
  text follows Zipf's law: its 20 most common words make up a large share of all words (about a quarter
  to a third in English); a bag of random tokens has no such head (`looks_random`).
- An EAGLE-3 draft launched with `--speculative-algorithm EAGLE`, or an EAGLE draft with `EAGLE3`, where
  the draft's `config.json` names its architecture: it runs, and accepts (almost) nothing.

The limits come from the server's own report (`/server_info`) or, failing that, its launch command.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

RANDOM_TOP_WORDS = 20
"""How many of the most common words `looks_random` sums."""
RANDOM_HEAD_SHARE = 0.10
"""Below this share of all words in the top `RANDOM_TOP_WORDS`, a prompt set looks like random tokens."""
MIN_WORDS = 200
"""Fewer words than this say nothing either way."""

_GRAPH = (("cuda_graph_max_bs", "max_cudagraph_capture_size"), ("--cuda-graph-max-bs", "--max-cudagraph-capture-size"))
_RUNNING = (("max_running_requests", "max_num_seqs"), ("--max-running-requests", "--max-num-seqs"))


def _limit(
    args: Mapping[str, Any], argv: Sequence[str], keys: tuple[tuple[str, ...], tuple[str, ...]]
) -> tuple[int, str] | None:
    """(value, flag name) from the server's args, else the command line; None when unset."""
    for key, flag in zip(*keys, strict=True):
        v = args.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v, flag
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name in keys[1]:
            text = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            if text.isdigit() and int(text) > 0:
                return int(text), name
    return None


def looks_random(prompts: Sequence[str]) -> bool:
    """True when the prompts have no Zipf head (see the module docstring); False for too little text."""
    words = re.findall(r"\w+", " ".join(prompts).lower())
    if len(words) < MIN_WORDS:
        return False
    head = sum(n for _, n in Counter(words).most_common(RANDOM_TOP_WORDS))
    return head / len(words) < RANDOM_HEAD_SHARE


def _algorithm(args: Mapping[str, Any], argv: Sequence[str]) -> str:
    v = args.get("speculative_algorithm")
    if isinstance(v, str) and v and v != "None":
        return v.upper()
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name == "--speculative-algorithm":
            return (value if eq else (argv[i + 1] if i + 1 < len(argv) else "")).upper()
    return ""


def draft_mismatch(algorithm: str, architectures: Sequence[str]) -> str | None:
    """A warning when the draft's architecture (from its config.json) is EAGLE-3 but the algorithm is EAGLE,
    or the reverse; None when they agree or nothing is known."""
    archs = [a.lower() for a in architectures]
    eagle3 = any("eagle3" in a for a in archs)
    eagle = any("eagle" in a for a in archs) and not eagle3
    names = ", ".join(architectures)
    if algorithm == "EAGLE" and eagle3:
        return (
            f"the draft is an EAGLE-3 model ({names}) but the server runs --speculative-algorithm EAGLE: "
            "acceptance will read about 1.0; launch with --speculative-algorithm EAGLE3"
        )
    if algorithm == "EAGLE3" and eagle:
        return (
            f"the draft is an EAGLE (not EAGLE-3) model ({names}) but the server runs "
            "--speculative-algorithm EAGLE3: acceptance will read low; launch with EAGLE"
        )
    return None


def sweep_guards(
    levels: Sequence[int],
    server_args: Mapping[str, Any] | None,
    argv: Sequence[str] = (),
    *,
    speculative: bool = False,
    prompts: Sequence[str] = (),
    draft_architectures: Sequence[str] = (),
) -> list[str]:
    """Every warning that applies before sweeping `levels` (see the module docstring)."""
    args = server_args or {}
    argv = [str(a) for a in argv]
    out = []
    graph = _limit(args, argv, _GRAPH)
    if graph is not None:
        above = [c for c in levels if c > graph[0]]
        if above:
            out.append(
                f"level{'s' if len(above) > 1 else ''} {', '.join(map(str, above))} above the server's "
                f"{graph[1]} {graph[0]}: batches larger than {graph[0]} run without CUDA graphs (eager decode), "
                "so those levels measure a slower path"
            )
    running = _limit(args, argv, _RUNNING)
    if running is not None:
        above = [c for c in levels if c > running[0]]
        if above:
            out.append(
                f"level{'s' if len(above) > 1 else ''} {', '.join(map(str, above))} above the server's "
                f"{running[1]} {running[0]}: at most {running[0]} requests run at once, the rest queue and "
                "their wait shows up as TTFT"
            )
    if speculative and looks_random(prompts):
        out.append(
            "the prompts look like random tokens: drafts rarely match them, so acceptance (and the speculative "
            "mode's speedup) will read lower than on real traffic; use --prompts chat or code, or your own"
        )
    mismatch = draft_mismatch(_algorithm(args, argv), draft_architectures)
    if mismatch is not None:
        out.append(mismatch)
    return out
