"""Acceptance of speculative drafts: the alarm for a draft that does not match its target (pure).

A mean acceptance length near 1.0 means the verify step keeps only its own bonus token: every draft token is
rejected. SGLang users lost days to an EAGLE-3 draft launched with `--speculative-algorithm EAGLE`, which runs
and silently reports accept length 1.00. A speculative mode whose acceptance stays below `ALARM_BELOW` at every
level it reported is flagged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

ALARM_BELOW = 1.1
"""Mean tokens per verify step below which drafts are (almost) never accepted."""

_SPEC_KEYS = ("speculative_algorithm", "speculative_config", "speculative_model", "speculative_draft_model_path")


def is_speculative(server_args: Mapping[str, Any] | None, argv: Sequence[str] = ()) -> bool:
    """True when the server's arguments or launch command turn speculative decoding on."""
    args = server_args or {}
    if any(args.get(k) not in (None, "", "None", {}) for k in _SPEC_KEYS):
        return True
    return any(
        str(a).startswith(("--speculative-algorithm", "--speculative-config", "--speculative-model")) for a in argv
    )


def acceptance_line(
    mode: str, concurrency: int, accept_length: float, draft_share: float | None, per_position: Sequence[float]
) -> str:
    """One level's acceptance in words: tokens per verify step, the drafts' share of the output and the
    acceptance by draft position (the last two only where the engine counts them)."""
    parts = [f"acceptance · {mode} C={concurrency}: {accept_length:.2f} tokens per verify step"]
    if draft_share is not None:
        parts.append(f"{draft_share * 100:.0f} % of output from drafts")
    if per_position:
        parts.append("by draft position " + " ".join(f"{p:.2f}" for p in per_position))
    return " · ".join(parts)


def accept_alarm(mode: str, accept_lengths: Iterable[float | None]) -> str | None:
    """A warning when every reported acceptance length of `mode` is below `ALARM_BELOW`; None otherwise."""
    values = [v for v in accept_lengths if v is not None]
    if not values or max(values) >= ALARM_BELOW:
        return None
    return (
        f"{mode}: mean accept length stays at {max(values):.2f} (below {ALARM_BELOW}): drafts are almost never "
        "accepted; check that the draft model matches the target and the --speculative-algorithm "
        "(EAGLE vs EAGLE3), and that the prompts are not random tokens"
    )
