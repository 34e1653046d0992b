"""Startup ETA from the history of the same host and mode, refined as phases complete.

Inputs are past startups of the same (host, mode) that reached ready, each a mapping phase -> seconds.
The estimate for a running startup is:

    remaining = rest of the current phase + sum of the median durations of the phases still to come

- The median of each phase over the last `HISTORY` startups, so one odd start does not dominate.
- The rest of the current phase is its median minus the time spent in it; when the phase reports
  progress (shard n/N, graph batch i/M) and at least 5 % is done, the progress rate is blended in, since
  a bar is a better witness of this run's speed than history.
- Phases already finished tell how this run compares to history: the remaining medians are scaled by
  (actual / median) of the finished phases, clamped to [0.5, 2].
- With no history there is no estimate (None), and the UI says "no history yet" instead of inventing one.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from specdash.core.models import STARTUP_ORDER, Phase

HISTORY = 5
"""How many of the most recent startups count."""


@dataclass(frozen=True)
class Estimate:
    """An ETA for a running startup."""

    remaining: float
    """Seconds until ready."""
    total: float
    """Expected total startup time, seconds (elapsed + remaining)."""
    samples: int
    """How many past startups it is based on."""


def phase_medians(history: Sequence[Mapping[str, float]]) -> dict[Phase, float]:
    """Median seconds per phase over the most recent `HISTORY` startups (oldest first in `history`)."""
    recent = history[-HISTORY:]
    out: dict[Phase, float] = {}
    for phase in Phase:
        values = [float(h[phase.value]) for h in recent if phase.value in h]
        if values:
            out[phase] = statistics.median(values)
    return out


def estimate(
    history: Sequence[Mapping[str, float]],
    finished: Mapping[Phase, float],
    current: Phase,
    in_phase: float,
    fraction: float | None = None,
    order: Sequence[Phase] = STARTUP_ORDER,
) -> Estimate | None:
    """Estimate the time to ready.

    Args:
        history: past startups of this host and mode, phase name -> seconds, oldest first.
        finished: phases of this startup already completed -> their durations.
        current: the phase the server is in now.
        in_phase: seconds spent in the current phase so far.
        fraction: progress inside the current phase (0-1), when the phase reports it.
        order: the engine's startup order (vLLM loads its drafter before the KV cache, SGLang after the graphs).
    """
    if not history or current not in order:
        return None
    if current is Phase.READY:
        return Estimate(0.0, sum(finished.values()), len(history[-HISTORY:]))
    medians = phase_medians(history)
    expected_done = sum(medians.get(p, 0.0) for p in finished)
    actual_done = sum(finished.values())
    scale = 1.0 if expected_done <= 0 else max(0.5, min(2.0, actual_done / expected_done))

    rest_of_current = max(0.0, medians.get(current, 0.0) * scale - in_phase)
    if fraction is not None and 0.05 <= fraction < 1.0 and in_phase > 0:
        by_rate = in_phase * (1.0 - fraction) / fraction
        # The further the bar, the more it is trusted over history.
        rest_of_current = fraction * by_rate + (1.0 - fraction) * rest_of_current
    later = order[list(order).index(current) + 1 :]
    rest = sum(medians.get(p, 0.0) for p in later if p not in finished) * scale
    remaining = rest_of_current + rest
    return Estimate(remaining, actual_done + in_phase + remaining, len(history[-HISTORY:]))
