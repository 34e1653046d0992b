"""Comparing modes across concurrency: per-level ratios and the crossover concurrency (pure).

The crossover is where speculative decoding stops paying: below it the speculative mode delivers more
aggregate output tok/s than the baseline, above it the same or less. It is the threshold a dynamic
speculation switch (e.g. SGLang's adaptive speculation, or disabling drafts above a running batch size)
should use.

How it is computed (`compute_crossover`):

1. Only concurrency levels measured in both modes count; they are sorted ascending.
2. At each level r(C) = spec tok/s / baseline tok/s. Speculation "pays" when r(C) > 1 + margin.
3. The crossover lies between the last paying level C_i and the next level C_j (the first non-paying
   level after the lowest paying one). Between them r is interpolated linearly in log C, because the
   levels are roughly geometric (1, 2, 5, 10, 20, 50, 100) and throughput curves are smooth in log C:
   C* = exp(ln C_i + (r_i - t) / (r_i - r_j) * (ln C_j - ln C_i)), with t = 1 + margin.
4. A later level where speculation pays again (noise at high C) does not move the crossover: the first
   crossing wins, because a disable threshold has to protect the levels right above it.
5. If speculation pays at every measured level, there is no crossover within range (`above_range`);
   if it pays at none, speculation never pays (`never_pays`).

The recommended threshold `disable_above` is floor(C*): run speculation at running batch sizes up to
and including it and disable it above.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass


class CrossoverKind(enum.StrEnum):
    """How the two curves relate over the measured range."""

    CROSSES = "crosses"
    """Speculation pays at low concurrency and stops paying inside the measured range."""
    ABOVE_RANGE = "above_range"
    """Speculation pays at every measured level; the crossover (if any) is above the highest level."""
    NEVER_PAYS = "never_pays"
    """Speculation does not pay even at the lowest measured level."""
    NO_DATA = "no_data"
    """No level was measured in both modes."""


@dataclass(frozen=True)
class LevelRatio:
    """Both modes at one concurrency."""

    concurrency: int
    """The nominal concurrency C."""
    baseline: float
    """Baseline aggregate output tok/s."""
    spec: float
    """Speculative aggregate output tok/s."""

    @property
    def ratio(self) -> float:
        """spec / baseline (inf when only the baseline is 0; 1.0 when both are: neither wins, e.g. no goodput
        at all at a level beyond either mode's SLO)."""
        if self.baseline > 0:
            return self.spec / self.baseline
        return math.inf if self.spec > 0 else 1.0


@dataclass(frozen=True)
class Crossover:
    """Where speculative decoding stops paying."""

    kind: CrossoverKind
    """How the curves relate."""
    concurrency: float | None
    """The interpolated crossover C* (only for `CROSSES`)."""
    ratios: tuple[LevelRatio, ...]
    """Per-level ratios over the common levels, ascending."""

    @property
    def disable_above(self) -> int | None:
        """Recommended speculation-disable threshold: disable when the running batch exceeds this.

        floor(C*) when the curves cross; the highest measured level when speculation pays everywhere
        (a conservative bound: nothing is known above it); 0 when it never pays.
        """
        if self.kind is CrossoverKind.CROSSES and self.concurrency is not None:
            return max(1, math.floor(self.concurrency))
        if self.kind is CrossoverKind.ABOVE_RANGE:
            return self.ratios[-1].concurrency
        if self.kind is CrossoverKind.NEVER_PAYS:
            return 0
        return None


def level_ratios(baseline: Mapping[int, float], spec: Mapping[int, float]) -> tuple[LevelRatio, ...]:
    """Ratios at the concurrency levels present in both curves, ascending."""
    common = sorted(set(baseline) & set(spec))
    return tuple(LevelRatio(c, float(baseline[c]), float(spec[c])) for c in common)


def compute_crossover(baseline: Mapping[int, float], spec: Mapping[int, float], margin: float = 0.0) -> Crossover:
    """The concurrency above which the speculative mode stops beating the baseline.

    Args:
        baseline: Aggregate output tok/s per concurrency level for the baseline mode.
        spec: The same for the speculative mode.
        margin: Speculation pays only when spec/baseline > 1 + margin (e.g. 0.05 to ignore noise).

    Returns:
        The crossover; see the module docstring for the method.
    """
    ratios = level_ratios(baseline, spec)
    if not ratios:
        return Crossover(CrossoverKind.NO_DATA, None, ratios)
    threshold = 1.0 + margin
    pays = [r.ratio > threshold for r in ratios]
    if not pays[0]:
        return Crossover(CrossoverKind.NEVER_PAYS, None, ratios)
    for i in range(1, len(ratios)):
        if not pays[i]:
            lo, hi = ratios[i - 1], ratios[i]
            r_lo, r_hi = lo.ratio, hi.ratio
            if math.isinf(r_lo) or r_lo == r_hi:
                frac = 1.0
            else:
                frac = (r_lo - threshold) / (r_lo - r_hi)
            ln_c = math.log(lo.concurrency) + frac * (math.log(hi.concurrency) - math.log(lo.concurrency))
            return Crossover(CrossoverKind.CROSSES, math.exp(ln_c), ratios)
    return Crossover(CrossoverKind.ABOVE_RANGE, None, ratios)


NOISY_RELATIVE_MAD = 0.05
"""A pooled point whose MAD exceeds this share of its median is flagged noisy (vLLM's
`tune_speculative_k.py` rejects such points; we show them, marked)."""


@dataclass(frozen=True)
class Spread:
    """One (mode, C) point over repeated runs: the median and the median absolute deviation."""

    median: float
    """Median aggregate tok/s over the runs that finished this level."""
    mad: float
    """Median absolute deviation from `median`."""
    low: float
    """Smallest run."""
    high: float
    """Largest run."""
    n: int
    """Runs that finished this level."""

    @property
    def noisy(self) -> bool:
        """More spread than `NOISY_RELATIVE_MAD` allows (or too few runs to tell: n < 3 is not noisy)."""
        return self.n >= 3 and self.median > 0 and self.mad / self.median > NOISY_RELATIVE_MAD


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def pool_runs(curves: list[Mapping[int, float]]) -> dict[int, Spread]:
    """Median and MAD per concurrency over repeated runs of one mode (a level missing from a run is skipped)."""
    levels = sorted({c for curve in curves for c in curve})
    out: dict[int, Spread] = {}
    for c in levels:
        values = [float(curve[c]) for curve in curves if c in curve]
        median = _median(values)
        out[c] = Spread(median, _median([abs(v - median) for v in values]), min(values), max(values), len(values))
    return out
