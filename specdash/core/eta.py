"""Startup ETA from the history of the same host and mode, refined as the start goes on.

Inputs are past startups of the same (host, mode) that specdash watched from launch to ready, each a
mapping phase -> seconds (`Timeline.history_record`). With `E` the expected whole start (the sum of the
per-phase medians), `e` what history expected to be done by now and `a` the time actually spent:

    pace      = 1 + (a - e) / E            (clamped to [0.5, 3])
    remaining = (rest of the current phase + medians of the phases still to come) * pace

- **Medians** per phase over the last `HISTORY` startups, so one odd start does not dominate.
- **Weighted by share.** How far this run is ahead or behind counts in proportion to the share of the
  whole start it concerns: a 2 s phase that took 3.4 s instead of 1.4 s moves a 9-minute estimate by
  (2 / 540) of what is left, about 2 s, not by the ratio of that phase (which would double it). Once most
  of the start is behind, the deviation so far weighs as much as it then should.
- **From the first second.** In launching (and in every phase) the estimate is the history minus the time
  spent; a phase that overruns its median adds its overrun to `a`, so the ETA grows instead of sitting at
  zero.
- **Progress bars** (shard n/N, batch sizes i/M) tell how much of the current phase is done, and at 5 %
  or more their rate is blended in (the further the bar, the more it is trusted over history).
- **Spread.** Each past start, read at the same point (same phase, same share of it done), says how long
  it still took; the spread is the standard deviation of those remainders (scaled by the pace), so the UI
  can say `ready in 7m 10s ± 20s, from 5 starts`. One past start gives no spread.
- With no history there is no estimate (None), and the UI says "no history yet" instead of inventing one.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from specdash.phases import STARTUP_ORDER, Phase

HISTORY = 5
"""How many of the most recent startups count."""
PACE_RANGE = (0.5, 3.0)
"""How far the pace of this run may scale what history says is left."""
BAR_TRUSTED_FROM = 0.05
"""A progress bar's rate is blended in from this fraction of the phase on."""


@dataclass(frozen=True)
class Estimate:
    """An ETA for a running startup."""

    remaining: float
    """Seconds until ready."""
    total: float
    """Expected total startup time, seconds (elapsed + remaining)."""
    samples: int
    """How many past startups it is based on."""
    spread: float | None = None
    """One standard deviation of `remaining` over those startups, seconds; None with fewer than two."""


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
    """Estimate the time to ready (see the module docstring).

    Args:
        history: past startups of this host and mode, phase name -> seconds, oldest first.
        finished: phases of this startup already completed -> their durations.
        current: the phase the server is in now.
        in_phase: seconds spent in the current phase so far.
        fraction: progress inside the current phase (0-1), when the phase reports it.
        order: the engine's startup order (vLLM loads its drafter before the KV cache, SGLang after the graphs).
    """
    recent = list(history[-HISTORY:])
    if not recent or current not in order:
        return None
    actual_done = sum(finished.values())
    if current is Phase.READY:
        return Estimate(0.0, actual_done, len(recent))
    medians = phase_medians(recent)
    startup = [p for p in order if p is not Phase.READY]
    expected_total = sum(medians.get(p, 0.0) for p in startup)
    later = [p for p in startup[startup.index(current) + 1 :] if p not in finished]

    median_now = medians.get(current, 0.0)
    bar = fraction if fraction is not None and BAR_TRUSTED_FROM <= fraction < 1.0 and in_phase > 0 else None
    # The share of the current phase behind us: the bar's word when there is one, else the clock's.
    share = bar if bar is not None else (min(1.0, in_phase / median_now) if median_now > 0 else 1.0)
    expected_done = sum(medians.get(p, 0.0) for p in finished) + share * median_now
    spent = actual_done + in_phase
    pace = 1.0 if expected_total <= 0 else 1.0 + (spent - expected_done) / expected_total
    pace = max(PACE_RANGE[0], min(PACE_RANGE[1], pace))

    rest_of_current = (1.0 - share) * median_now * pace
    if bar is not None:
        by_rate = in_phase * (1.0 - bar) / bar
        rest_of_current = bar * by_rate + (1.0 - bar) * rest_of_current
    remaining = rest_of_current + sum(medians.get(p, 0.0) for p in later) * pace

    # Each past start at the same point: what it still had of this phase, plus its later phases.
    remainders = [
        ((1.0 - share) * float(h.get(current.value, 0.0)) + sum(float(h.get(p.value, 0.0)) for p in later)) * pace
        for h in recent
    ]
    spread = statistics.stdev(remainders) if len(remainders) >= 2 else None
    return Estimate(remaining, spent + remaining, len(recent), spread)
