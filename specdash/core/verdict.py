"""The one-sentence answer of a sweep, and the speedup of each mode against the reference mode (pure).

The reference mode is the first one measured (the baseline of an A/B). For every other mode the verdict says
where it stops beating the reference (`core.compare.compute_crossover`), its best speedup, and the
speculation-disable threshold; with an SLO it adds the largest concurrency each mode serves within it and
the crossover of the token-goodput curves. The UI wraps this text, never truncates it; the headless reports
print it first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from specdash.core.compare import Crossover, CrossoverKind, compute_crossover


def speedups(reference: Mapping[int, float], other: Mapping[int, float]) -> dict[int, float]:
    """C -> other / reference at the levels both measured (a zero reference is left out)."""
    return {c: other[c] / reference[c] for c in sorted(set(reference) & set(other)) if reference[c] > 0}


def _best(ratios: Mapping[int, float]) -> str:
    finite = {c: r for c, r in ratios.items() if math.isfinite(r)}
    if not finite:
        return ""
    c = max(finite, key=lambda k: finite[k])
    return f"{ratios[c]:.2f}x at C={c}"


def crossover_sentence(mode: str, reference: str, x: Crossover, what: str = "") -> str:
    """`eagle3 beats baseline up to C≈2.4 (best 1.87x at C=1); disable speculation above 2 running requests`.

    `what` names the figure compared when it is not tok/s (e.g. `in goodput`).
    """
    ratios = {r.concurrency: r.ratio for r in x.ratios}
    best = f" (best {_best(ratios)})" if _best(ratios) else ""
    how = f" {what}" if what else ""
    if x.kind is CrossoverKind.CROSSES and x.concurrency is not None:
        advice = "" if what else f"; disable speculation above {x.disable_above} running requests"
        # The crossover is the first loss; a win at a higher level is said too, not hidden behind it.
        again = {c: r for c, r in ratios.items() if c > x.concurrency and r > 1.0}
        also = f", and again at {_levels(again)}" if again else ""
        return f"{mode} beats {reference}{how} up to C≈{x.concurrency:.1f}{also}{best}{advice}"
    if x.kind is CrossoverKind.ABOVE_RANGE:
        return f"{mode} beats {reference}{how} at every measured level, up to C={x.ratios[-1].concurrency}{best}"
    if x.kind is CrossoverKind.NEVER_PAYS:
        worst = min(ratios.values())
        first = x.ratios[0].concurrency
        wins = {c: r for c, r in ratios.items() if r > 1.0}
        if wins:  # loses at the lowest level, wins higher up: "never" would be false
            return (
                f"{mode} loses to {reference}{how} at C={first} ({ratios[first]:.2f}x) but beats it at "
                f"{_levels(wins)}{best if len(wins) > 1 else ''}"
            )
        down = f", down to {worst:.2f}x" if worst < ratios[first] else ""
        return f"{mode} never beats {reference}{how}: {ratios[first]:.2f}x at C={first}{down}"
    return f"{mode} and {reference} share no measured level"


def _levels(ratios: Mapping[int, float]) -> str:
    """`C=4 (1.33x), C=16 (1.10x)`."""
    return ", ".join(f"C={c} ({r:.2f}x)" if math.isfinite(r) else f"C={c} (from 0)" for c, r in sorted(ratios.items()))


def verdict(
    curves: Mapping[str, Mapping[int, float]],
    *,
    slo_text: str = "",
    capacity: Mapping[str, int | None] | None = None,
    goodput: Mapping[str, Mapping[int, float]] | None = None,
) -> str:
    """The sweep's answer in one or two sentences ("" with no finished level).

    Args:
        curves: mode -> C -> aggregate tok/s, in the order measured (the first is the reference).
        slo_text: The SLO's text, when one was given.
        capacity: mode -> the largest C meeting the SLO (None: not even the lowest level).
        goodput: mode -> C -> token goodput under the SLO, for the crossover under the SLO.
    """
    modes = [m for m, c in curves.items() if c]
    if not modes:
        return ""
    ref = modes[0]
    parts: list[str] = []
    if len(modes) == 1:
        c = curves[ref]
        top = max(c, key=lambda k: c[k])
        parts.append(f"{ref}: peak {c[top]:,.0f} tok/s at C={top} over C={min(c)}..{max(c)}")
    for mode in modes[1:]:
        parts.append(crossover_sentence(mode, ref, compute_crossover(curves[ref], curves[mode])))
    if slo_text and capacity is not None:
        within = ", ".join(f"{m} up to C={c}" if c is not None else f"{m} at no level" for m, c in capacity.items())
        sentence = f"Under the SLO ({slo_text}): {within}"
        if goodput is not None:
            g_modes = [m for m in modes if goodput.get(m)]
            if len(g_modes) >= 2:
                x = compute_crossover(goodput[g_modes[0]], goodput[g_modes[1]])
                sentence += "; " + crossover_sentence(g_modes[1], g_modes[0], x, "in goodput")
        parts.append(sentence)
    return ". ".join(parts) + "."


def speedup_strip(curves: Mapping[str, Mapping[int, float]], crossover: float | None = None) -> str:
    """What the charts say, in one line, for a terminal too small to read them: the speedup of each mode over
    the reference (the first) per measured level, and the crossover C.

    `eagle3/baseline  C=1 2.44×  C=5 2.03×  C=20 0.86×  · crossover C≈12.5`; one mode alone: its tok/s per
    level (`baseline tok/s  C=1 152  C=5 690`); "" with no finished level.
    """
    modes = [m for m, c in curves.items() if c]
    if not modes:
        return ""
    ref = modes[0]
    if len(modes) == 1:
        c = curves[ref]
        return f"{ref} tok/s  " + "  ".join(f"C={k} {c[k]:,.0f}" for k in sorted(c))
    parts = []
    for mode in modes[1:]:
        ratios = speedups(curves[ref], curves[mode])
        levels = "  ".join(f"C={k} {r:.2f}×" if math.isfinite(r) else f"C={k} -" for k, r in ratios.items())
        parts.append(f"{mode}/{ref}  {levels or 'no common level'}")
    where = f"  · crossover C≈{crossover:.1f}" if crossover is not None else ""
    return " │ ".join(parts) + where
