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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from specdash.core.events import TuneEntry
from specdash.core.status_text import duration
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


@dataclass(frozen=True)
class Restart:
    """A (re)start a sweep makes, with what the host's history says it takes."""

    mode: str
    history: tuple[float, ...]
    """Seconds to ready of the mode's recorded starts on this host (any order); empty: never recorded."""
    count: int = 1
    """How many starts of this mode it makes (a tune restarts the same mode once per setting and pass)."""

    @property
    def seconds(self) -> float | None:
        """The median of the last `HISTORY` starts, None without any."""
        return statistics.median(self.history[:HISTORY]) if self.history else None

    def text(self) -> str:
        if self.seconds is None:
            return f"restart time unknown: no start of {self.mode} recorded"
        n = len(self.history[:HISTORY])
        times = f"{self.count} x " if self.count != 1 else ""
        return f"{times}{self.mode} restart ~{duration(self.seconds)} from {n} start{'s' if n != 1 else ''}"


@dataclass(frozen=True)
class SweepEstimate:
    """How long a sweep, an A/B or a rerun of levels should take, before it starts (`sweep_estimate`)."""

    restarts: tuple[Restart, ...]
    """The starts it makes (none when it measures the live server as it runs)."""
    levels: int
    """Levels to measure, over every mode."""
    level_s: float | None
    """Seconds per level (a level of fixed duration: warmup aside); None for request-count levels."""

    @property
    def seconds(self) -> float | None:
        """The whole expected time; None when a part of it is unknown (never invented)."""
        parts = [r.seconds for r in self.restarts]
        if self.level_s is None or any(p is None for p in parts):
            return None
        return sum(r.count * r.seconds for r in self.restarts if r.seconds is not None) + self.levels * self.level_s

    def text(self) -> str:
        """`about 3 min 40 s: eagle3 restart ~31 s from 5 starts + 6 levels x 9 s`, or what is unknown."""
        plural = "s" if self.levels != 1 else ""
        levels = (
            f"{self.levels} level{plural} x {duration(self.level_s)}"
            if self.level_s is not None
            else f"{self.levels} level{plural} of unknown length (request-count levels: set a duration to know)"
        )
        what = " + ".join([*(r.text() for r in self.restarts), levels])
        total = self.seconds
        return f"about {duration(total)}: {what}" if total is not None else f"no estimate: {what}"


def sweep_estimate(
    restarts: Sequence[tuple[str, Sequence[float]]], levels: int, level_s: float | None
) -> SweepEstimate:
    """The estimate from each (re)start's mode and its recorded starts to ready, the levels and their length.

    Starts of the same mode are counted together (`4 x eagle3 restart ~31 s`), in the order they first come."""
    counted: dict[str, Restart] = {}
    for mode, h in restarts:
        known = counted.get(mode)
        counted[mode] = Restart(mode, tuple(h), known.count + 1 if known else 1)
    return SweepEstimate(tuple(counted.values()), levels, level_s)


def tune_estimate(
    entry: TuneEntry, ready_s: Callable[[str], Sequence[float]], level_s: float | None, hold: float
) -> SweepEstimate:
    """A `[tune.NAME]` entry's expected time at most: its full grid, each pass restarting the baseline and every
    setting of the mode (a setting starts as its mode does) and measuring every level, then the verification
    (a restart of the tuned mode, the levels again and the hold of `hold` levels' length). The drop rule and a
    resumed journal save some; the threshold's extra verify levels are not counted.

    Args:
        entry: the entry, with its plan's size (`tune.plan.tune_entries`).
        ready_s: a mode's recorded starts to ready on the host (`RemoteSession.ready_s`).
        level_s: seconds per level (None: request-count levels, of unknown length).
        hold: the verification's hold, in levels (`TuneOptions.hold`).
    """
    per_pass = [entry.baseline, *[entry.mode] * entry.settings]
    restarts = [*per_pass * entry.repeats, entry.mode]
    levels = len(per_pass) * entry.repeats * len(entry.levels) + len(entry.levels) + round(hold)
    return sweep_estimate([(mode, ready_s(mode)) for mode in restarts], levels, level_s)


def countdown_text(expected_s: float | None, elapsed_s: float) -> str:
    """`about 2 min 10 s left`, `overdue by 12 s` once the estimate has run out, or the time spent when there
    is no estimate (`running 1 min 5 s, no estimate`)."""
    if expected_s is None:
        return f"running {duration(elapsed_s)}, no estimate"
    left = expected_s - elapsed_s
    if left < 0:
        return f"overdue by {duration(-left)}"
    return f"about {duration(left)} left"
