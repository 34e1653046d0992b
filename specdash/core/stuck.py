"""How long a startup phase may go without a sign of life before it counts as stuck, and which rule says so.

Three rules, the first that applies wins, per phase:

1. **Configured**: `[modes.NAME.stuck]` gives the phase a fixed limit (`"capturing CUDA graphs" = 1800`).
2. **History**: this mode on this host has finished the phase before: `factor` (3) times the slowest
   recorded duration, but never below `floor` (120 s). A box whose graph capture always takes 40 s is
   stuck after 2 minutes, not after the generic 20.
3. **Default**: `DEFAULT_STUCK_TIMEOUTS` (generous, for a first start of an unknown model).

The limit measures time without a phase change or progress (a shard loaded, a batch size captured), and
a recorded duration is the whole phase, so the history rule is conservative by construction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from specdash.config import HISTORY_FACTOR, HISTORY_FLOOR_S, StuckPolicy, phase_named
from specdash.phases import Phase

__all__ = [
    "DEFAULT_STUCK_TIMEOUTS",
    "HISTORY_FACTOR",
    "HISTORY_FLOOR_S",
    "StuckLimit",
    "StuckPolicy",
    "phase_named",
    "stuck_limits",
]

DEFAULT_STUCK_TIMEOUTS: Mapping[Phase, float] = {
    Phase.LAUNCHING: 600.0,  # imports, model download checks, ServerArgs
    Phase.DIST_INIT: 600.0,  # NCCL rendezvous hangs are the classic multi-GPU stall
    Phase.LOADING_WEIGHTS: 1800.0,  # without a shard moving; big checkpoints over NFS are slow
    Phase.ALLOCATING_KV: 600.0,
    Phase.CAPTURING_GRAPHS: 1200.0,
    Phase.LOADING_DRAFT: 1200.0,
    Phase.CAPTURING_DRAFT_GRAPHS: 1200.0,  # the draft graph can take 5x the target's (sglang#10088)
    Phase.WARMING_UP: 660.0,  # SGLANG_WARMUP_TIMEOUT defaults to 600 s
}
"""Seconds without a phase change or progress after which a phase counts as stuck, with no history."""


@dataclass(frozen=True, slots=True)
class StuckLimit:
    """One phase's limit and the rule that set it (the warning quotes it)."""

    seconds: float
    """Seconds without a sign of life."""
    rule: str
    """Which rule set it, e.g. `3x the slowest of 5 recorded starts (41 s), floor 120 s`."""


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"


def stuck_limits(history: Sequence[Mapping[str, float]], policy: StuckPolicy | None = None) -> dict[Phase, StuckLimit]:
    """Every startup phase's limit, from the mode's policy and its recorded startups on this host.

    `history` holds one dict per finished startup, phase value -> seconds (`Timeline.history_record`).
    """
    policy = policy or StuckPolicy()
    limits: dict[Phase, StuckLimit] = {}
    for phase, default in DEFAULT_STUCK_TIMEOUTS.items():
        if phase in policy.fixed:
            limits[phase] = StuckLimit(policy.fixed[phase], "set for this mode in [modes.*.stuck]")
            continue
        recorded = [run[phase.value] for run in history if run.get(phase.value) is not None]
        if recorded:
            slowest = max(recorded)
            seconds = max(policy.factor * slowest, policy.floor)
            starts = f"{len(recorded)} recorded start{'s' if len(recorded) != 1 else ''}"
            rule = f"{policy.factor:g}x the slowest of {starts} ({_seconds(slowest)}), floor {_seconds(policy.floor)}"
            limits[phase] = StuckLimit(seconds, rule)
        else:
            limits[phase] = StuckLimit(default, "default: no recorded start of this mode on this host")
    return limits
