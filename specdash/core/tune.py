"""The speculation tune's pure logic: the space, the order, the drop rule, the ETA and the policy.

A tune measures a set of speculative settings of one engine mode, each across the same concurrency levels,
with one server restart per (setting, repeat) and every level of it on that restart; the baseline mode is
measured the same way as the reference. Nothing here does I/O (`specdash.tune` runs it).

**Space.** `parse_space("steps=1,2,3,5 topk=1,4,8 draft=2,4,8,16")` is the cartesian product. Each point
goes through the engine's own rules (`specdash.engines.spec_settings`): a refused point is skipped with
the engine's reason; a point the engine adjusts (SGLang's topk = 1 forces draft = steps + 1) is skipped as
a duplicate of the one it runs as, which is measured once.

**Order** (`convergence_order`): the first setting is the one nearest the middle of every axis, then each
next one is the setting farthest (in log-scaled axis units) from all already chosen. The first few
settings bracket the space, so a good "current best" is known early and the drop rule bites soon.

**Repeats and the drop rule.** Pass 1 measures every setting once. Passes 2..R repeat only the settings
still in contention (the baseline is always repeated: it is the reference). A setting is *dropped* (no
more repeats) once, at every level it has measured, it is worse than the current best at that level by
more than both spreads: `best.median - x.median > best.spread + x.spread`, where the best is the
highest median at that level among all settings and the baseline, and a spread is
`max(MAD over repeats, noise_floor x median)` (the floor, 2 % by default, stands in for the run-to-run
noise a single run cannot show). Restarts saved: a dropped (or crashed) setting's restarts in the passes that
began after it was dropped; restarts a cancel kept from running are not saved.
Every restart gets its own engine seed (`specdash.tune.plan.seeded_args`), so a repeat is a new
sample, not a replay of the last one's random draws.

**Contention and the precision target.** A level's value is the median of its *blocks*: one block per
restart in pass 1; in passes 2..R a restart measures each of its *contended* levels in further blocks
(same duration, same restart: no extra restart) until its standard error is at most `precision` x median
(0.6 % by default) or `max_blocks` blocks were measured there. The standard error of a median of n
blocks is `1.2533 x sd / sqrt(n)` (normal noise), never below `noise_floor x median / sqrt(n)`, where
`sd` is the level's *pooled* relative standard deviation of one block times the median: the settings of
one mode share a level's noise (acceptance draws, scheduling), so every setting with at least two blocks
at a level contributes its squared relative deviations from its own mean, with n - 1 degrees of freedom
each. A setting with one block thus gets the noise its rivals showed, not a guess. The baseline (plain
decoding: no acceptance draws) is estimated from its own blocks only. With fewer than
`MIN_DOF_FOR_SD` degrees of freedom the floor stands in (`noise_floor x median`). Two candidates are
*separated* at a level when
`|a.median - b.median| > Z x sqrt(a.se^2 + b.se^2)` (Z = 2); a level is *contended* when some
candidate is not separated from the level's best, and its contenders are the best and those.

**Decision rule.** At each level the choice is the candidate with the highest median (the best estimate
after the runoff; the contenders were measured to the precision target). Contenders left unseparated
when the block budget ran out are reported as a *tie* (`Policy.ties`): their difference is within
Z standard errors, i.e. within about `2 x Z x precision` (2.4 %) of each other.

Blocks shrink the noise of a level, not its bias: a level shorter than a few request lifetimes has no
steady state and measures ramp and drain, differently per setting (benchmarks/RESULTS.md: 2 s levels of
1.8 s requests put one setting 7 % below its 60 s value). Choose the level duration for that, and
`noise_floor` near the noise of that duration (the drop rule after pass 1 has nothing else to go on).

**Policy** (`build_policy`): at each level the setting with the highest median, or "no speculation"
when the baseline's median is higher; its speedup over the baseline with a spread
(`speedup x (best.spread / best.median + base.spread / base.median)`); consecutive levels with the same
choice form a concurrency range `[C_i, C_next - 1]` (the last is open). The threshold above which
speculation stops paying is the crossover of the best-setting envelope against the baseline
(`specdash.core.compare.compute_crossover`: `disable_above`). The best *fixed* setting (one server for
every load) is the one with the highest mean speedup over the levels up to the threshold.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from specdash.core.compare import CrossoverKind, compute_crossover
from specdash.engines.spec_settings import SGLANG_KEYS, VLLM_KEYS, SpecSetting, Verdict
from specdash.errors import UsageError

DEFAULT_LEVELS = "1-32x2"
"""Concurrency levels of a tune that names none (`--levels`, `[tune.NAME] levels`)."""
DEFAULT_REPEATS = 2
"""Passes of a tune that names none."""

NOISE_FLOOR = 0.02
"""Smallest relative spread a level is given (a single run shows no spread of its own)."""
PRECISION = 0.006
"""Target relative standard error of a contended level (its blocks stop there)."""
MAX_BLOCKS = 40
"""Most blocks one restart measures at one contended level."""
Z = 2.0
"""Standard errors by which two candidates must differ to count as separated."""
MIN_DOF_FOR_SD = 2
"""Below this many degrees of freedom a level's noise is not estimated (the floor stands in)."""
BASELINE = "baseline"
"""The policy's name for "no speculation"."""
MAX_SPACE = 512
"""Upper bound on the points of a space (each one is a server restart)."""


def parse_space(text: str) -> tuple[dict[str, tuple[int, ...]], list[SpecSetting]]:
    """`'steps=1,2 topk=1,4 draft=4,8'` -> the axes and their cartesian product.

    Axes: `steps`, `topk`, `draft` (SGLang) or `k`, `lookup_max` (vLLM); not both families.

    Raises:
        UsageError: an unknown axis, a repeated one, a value that is not a positive integer, a mix of
            engine families or an empty or too large space.
    """
    axes: dict[str, tuple[int, ...]] = {}
    for part in text.replace(";", " ").split():
        name, sep, values = part.partition("=")
        if not sep or name not in (*SGLANG_KEYS, *VLLM_KEYS):
            raise UsageError(
                f"--space {part!r}: expected NAME=V1,V2,... with NAME one of {', '.join((*SGLANG_KEYS, *VLLM_KEYS))}"
            )
        if name in axes:
            raise UsageError(f"--space: {name} given twice")
        try:
            numbers = tuple(dict.fromkeys(int(v) for v in values.split(",") if v.strip()))
        except ValueError:
            raise UsageError(f"--space {part!r}: values must be integers") from None
        if not numbers or any(n < 1 for n in numbers):
            raise UsageError(f"--space {part!r}: values must be positive integers")
        axes[name] = numbers
    if not axes:
        raise UsageError("--space is empty: e.g. 'steps=1,2,3 topk=1,4 draft=4,8' or 'k=1,2,4'")
    families = {"sglang" if name in SGLANG_KEYS else "vllm" for name in axes}
    if len(families) > 1:
        raise UsageError("--space mixes SGLang axes (steps, topk, draft) with vLLM ones (k, lookup_max)")
    names = list(axes)
    points = [SpecSetting(**dict(zip(names, combo, strict=True))) for combo in itertools.product(*axes.values())]
    if len(points) > MAX_SPACE:
        raise UsageError(f"--space has {len(points)} points; at most {MAX_SPACE} (each is a server restart)")
    return axes, points


@dataclass(frozen=True)
class Skipped:
    """A point of the space that is not measured."""

    setting: SpecSetting
    """The point as given."""
    reason: str
    """The engine's reason, or which measured setting it duplicates."""


def runnable(
    points: Iterable[SpecSetting], check: Callable[[SpecSetting], Verdict]
) -> tuple[list[SpecSetting], list[Skipped]]:
    """The distinct settings the engine runs, and the points skipped with their reasons."""
    keep: list[SpecSetting] = []
    skipped: list[Skipped] = []
    for point in points:
        verdict = check(point)
        if verdict.runs_as is None:
            skipped.append(Skipped(point, f"refused: {verdict.reason}"))
        elif verdict.runs_as != point:
            skipped.append(Skipped(point, f"runs as {verdict.runs_as.label}: {verdict.reason}"))
            if verdict.runs_as not in keep:
                keep.append(verdict.runs_as)
        elif point not in keep:
            keep.append(point)
    return keep, skipped


def _coords(setting: SpecSetting) -> tuple[float, ...]:
    return tuple(math.log2(v) for v in setting.to_json().values())


def convergence_order(settings: Sequence[SpecSetting]) -> list[SpecSetting]:
    """Middle first, then farthest-point order (see the module docstring); ties keep the given order."""
    if not settings:
        return []
    coords = {s: _coords(s) for s in settings}
    dims = len(next(iter(coords.values())))
    lows = [min(c[i] for c in coords.values()) for i in range(dims)]
    highs = [max(c[i] for c in coords.values()) for i in range(dims)]
    scale = [(h - lo) or 1.0 for lo, h in zip(lows, highs, strict=True)]

    def dist(a: SpecSetting, b: tuple[float, ...]) -> float:
        return math.dist(
            [x / s for x, s in zip(coords[a], scale, strict=True)], [y / s for y, s in zip(b, scale, strict=True)]
        )

    middle = tuple((lo + h) / 2 for lo, h in zip(lows, highs, strict=True))
    order = [min(settings, key=lambda s: dist(s, middle))]
    rest = [s for s in settings if s != order[0]]
    while rest:
        nxt = max(rest, key=lambda s: min(dist(s, coords[o]) for o in order))
        order.append(nxt)
        rest.remove(nxt)
    return order


@dataclass(frozen=True)
class Point:
    """One (candidate, level) over its repeats."""

    median: float
    """Median aggregate output tok/s."""
    spread: float
    """max(MAD, noise floor x median)."""
    n: int
    """Blocks that measured it (over every restart)."""
    se: float = 0.0
    """Standard error of the median (see the module docstring)."""

    @property
    def rel_se(self) -> float:
        """`se / median` (inf when the median is 0)."""
        return self.se / abs(self.median) if self.median else math.inf


SE_OF_MEDIAN = 1.2533
"""SE of a normal sample's median per sd / sqrt(n) (sqrt(pi / 2))."""


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def point(values: Sequence[float], noise_floor: float = NOISE_FLOOR, rel_sd: float | None = None) -> Point:
    """Median, spread and standard error of one level's blocks.

    `rel_sd` is the relative sd of one block (pooled over the level's settings, `pooled_rel_sd`); None:
    estimated from `values` alone, or the floor when they have too few degrees of freedom.
    """
    median = _median(values)
    mad = _median([abs(v - median) for v in values])
    n = len(values)
    floor = noise_floor * abs(median)
    if rel_sd is None:
        rel_sd = pooled_rel_sd([values])
    if rel_sd is None:
        se = floor
    else:
        se = max(SE_OF_MEDIAN * rel_sd * abs(median), floor) / math.sqrt(n)
    return Point(median, max(mad, floor), n, se)


def pooled_rel_sd(groups: Iterable[Sequence[float]]) -> float | None:
    """Pooled relative sd of one value over groups of repeats (None below `MIN_DOF_FOR_SD`)."""
    ss = 0.0
    dof = 0
    for values in groups:
        if len(values) < 2:
            continue
        mean = sum(values) / len(values)
        if mean <= 0:
            continue
        ss += sum((v / mean - 1.0) ** 2 for v in values)
        dof += len(values) - 1
    return math.sqrt(ss / dof) if dof >= MIN_DOF_FOR_SD else None


def separated(a: Point, b: Point, z: float = Z) -> bool:
    """The medians differ by more than `z` standard errors of their difference."""
    return abs(a.median - b.median) > z * math.hypot(a.se, b.se)


def contenders(pts: Mapping[str, Mapping[int, Point]], c: int, names: Iterable[str] | None = None) -> tuple[str, ...]:
    """At level `c`: the best (highest median) first, then every candidate not separated from it.

    `names` limits the candidates (e.g. to those not dropped); a single name means the level is decided.
    """
    pool = [(n, pts[n][c]) for n in (names if names is not None else pts) if n in pts and c in pts[n]]
    if not pool:
        return ()
    best_name, best = max(pool, key=lambda item: item[1].median)
    return (best_name, *(n for n, p in pool if n != best_name and not separated(best, p)))


Measurements = Mapping[str, Mapping[int, Sequence[float]]]
"""candidate label (or BASELINE) -> level -> tok/s of each repeat."""


def points(measured: Measurements, noise_floor: float = NOISE_FLOOR) -> dict[str, dict[int, Point]]:
    """`Point`s of every candidate and level that has at least one value (settings' noise pooled per level)."""
    levels = {c for lv in measured.values() for c in lv}
    pooled = {c: pooled_rel_sd(lv[c] for name, lv in measured.items() if name != BASELINE and c in lv) for c in levels}
    return {
        name: {c: point(v, noise_floor, None if name == BASELINE else pooled[c]) for c, v in sorted(lv.items()) if v}
        for name, lv in measured.items()
    }


def dominated(name: str, pts: Mapping[str, Mapping[int, Point]]) -> bool:
    """The drop rule: `name` is worse than the best at every level it measured, by more than both spreads."""
    mine = pts.get(name, {})
    if not mine or name == BASELINE:
        return False
    for c, p in mine.items():
        rivals = [other[c] for other_name, other in pts.items() if other_name != name and c in other]
        if not rivals:
            return False
        best = max(rivals, key=lambda r: r.median)
        if not best.median - p.median > best.spread + p.spread:
            return False
    return True


@dataclass(frozen=True)
class Range:
    """One concurrency range of the policy."""

    low: int
    """First concurrency of the range."""
    high: int | None
    """Last concurrency (inclusive); None for the open top range."""
    choice: str
    """The setting's label, or BASELINE for "no speculation"."""
    speedup: float
    """Best median / baseline median at the range's measured levels (the lowest of them)."""
    spread: float
    """Spread of that speedup."""
    levels: tuple[int, ...]
    """The measured levels the range covers."""

    def to_json(self) -> dict[str, object]:
        """Plain data."""
        return {
            "low": self.low,
            "high": self.high,
            "choice": self.choice,
            "speedup": round(self.speedup, 4),
            "spread": round(self.spread, 4),
            "levels": list(self.levels),
        }


@dataclass(frozen=True)
class Policy:
    """What to run at which load."""

    ranges: tuple[Range, ...]
    """Concurrency ranges, ascending."""
    per_level: dict[int, tuple[str, float, float]]
    """level -> (choice, speedup, spread)."""
    disable_above: int | None
    """Speculation stops paying above this running batch (0: it does not pay at the lowest level, see `fixed`
    for whether it pays higher up; None: no data)."""
    crossover: float | None
    """The interpolated crossover concurrency, when the envelope crosses the baseline in range."""
    fixed: str | None
    """The best fixed setting (one server for all loads), or None when speculation pays at no level."""
    fixed_speedup: dict[int, float] = field(default_factory=dict)
    """The fixed setting's speedup at each level."""
    ties: dict[int, tuple[str, ...]] = field(default_factory=dict)
    """level -> the choice and the candidates not separated from it (only levels with a tie)."""

    @property
    def pays_from(self) -> int | None:
        """The lowest running batch where speculation pays, when it loses at the lowest level and pays above it
        (an inverted crossover: `disable_above` is 0 but `fixed` is set); None otherwise."""
        if self.disable_above != 0 or self.fixed is None:
            return None
        return next((r.low for r in self.ranges if r.choice != BASELINE), None)

    def to_json(self) -> dict[str, object]:
        """Plain data (the `--json` output's `policy`)."""
        return {
            "ranges": [r.to_json() for r in self.ranges],
            "per_level": {
                str(c): {"choice": ch, "speedup": round(s, 4), "spread": round(sp, 4)}
                for c, (ch, s, sp) in sorted(self.per_level.items())
            },
            "disable_above": self.disable_above,
            "crossover": self.crossover,
            "fixed": self.fixed,
            "fixed_speedup": {str(c): round(s, 4) for c, s in sorted(self.fixed_speedup.items())},
            "ties": {str(c): list(t) for c, t in sorted(self.ties.items())},
            "decision": "highest median per level; candidates within "
            f"{Z:g} standard errors of it are reported as a tie",
        }


def build_policy(pts: Mapping[str, Mapping[int, Point]], dropped: Iterable[str] = ()) -> Policy:
    """The policy from the measured points (see the module docstring); needs the baseline's points.

    `dropped` settings (the drop rule took them out) are not reported in ties.
    """
    base = pts.get(BASELINE, {})
    levels = sorted(base)
    per_level: dict[int, tuple[str, float, float]] = {}
    envelope: dict[int, float] = {}
    for c in levels:
        b = base[c]
        cands = [(name, p[c]) for name, p in pts.items() if name != BASELINE and c in p]
        if not cands or b.median <= 0:
            per_level[c] = (BASELINE, 1.0, 0.0)
            continue
        name, best = max(cands, key=lambda item: item[1].median)
        envelope[c] = best.median
        speedup = best.median / b.median
        spread = speedup * (best.spread / best.median + b.spread / b.median) if best.median > 0 else 0.0
        if best.median > b.median:
            per_level[c] = (name, speedup, spread)
        else:
            per_level[c] = (BASELINE, 1.0, 0.0)
    ranges: list[Range] = []
    for i, c in enumerate(levels):
        choice, speedup, spread = per_level[c]
        if ranges and ranges[-1].choice == choice:
            last = ranges[-1]
            ranges[-1] = Range(last.low, None, choice, last.speedup, last.spread, (*last.levels, c))
        else:
            if ranges:
                prev = ranges[-1]
                ranges[-1] = Range(prev.low, c - 1, prev.choice, prev.speedup, prev.spread, prev.levels)
            ranges.append(Range(1 if i == 0 else c, None, choice, speedup, spread, (c,)))
    crossover = compute_crossover({c: base[c].median for c in levels}, envelope) if envelope else None
    disable_above = crossover.disable_above if crossover is not None else None
    if disable_above:
        # Where speculation hands over to plain decoding, the boundary is the crossover, not the next level.
        for i, r in enumerate(ranges[:-1]):
            nxt = ranges[i + 1]
            if r.choice != BASELINE and nxt.choice == BASELINE and r.levels[-1] <= disable_above < nxt.levels[0]:
                ranges[i] = dataclasses.replace(r, high=disable_above)
                ranges[i + 1] = dataclasses.replace(nxt, low=disable_above + 1)
    fixed, fixed_speedup = _best_fixed(pts, levels, disable_above, per_level)
    out = set(dropped)
    names = [n for n in pts if n not in out]
    ties = {c: t for c in levels if len(t := contenders(pts, c, names)) > 1}
    return Policy(
        ranges=tuple(ranges),
        per_level=per_level,
        disable_above=disable_above,
        crossover=crossover.concurrency if crossover is not None and crossover.kind is CrossoverKind.CROSSES else None,
        fixed=fixed,
        fixed_speedup=fixed_speedup,
        ties=ties,
    )


def _best_fixed(
    pts: Mapping[str, Mapping[int, Point]],
    levels: Sequence[int],
    disable_above: int | None,
    per_level: Mapping[int, tuple[str, float, float]],
) -> tuple[str | None, dict[int, float]]:
    """The setting with the best mean speedup over the levels where speculation pays.

    Those are the levels up to `disable_above`; when it is 0 (speculation loses at the lowest level), the
    levels where a candidate beats the baseline anyway (an inverted crossover: it pays only under load).
    None when no candidate beats the baseline at any level.
    """
    base = pts[BASELINE]
    if disable_above == 0:
        paying = [c for c in levels if per_level[c][0] != BASELINE]
        if not paying:
            return None, {}
    else:
        paying = [c for c in levels if disable_above is None or c <= disable_above] or list(levels[:1])
    best: tuple[float, str] | None = None
    for name, p in pts.items():
        if name == BASELINE or not all(c in p for c in paying):
            continue
        score = sum(p[c].median / base[c].median for c in paying) / len(paying)
        if best is None or score > best[0]:
            best = (score, name)
    if best is None:
        return None, {}
    name = best[1]
    return name, {c: pts[name][c].median / base[c].median for c in levels if c in pts[name]}


@dataclass(frozen=True)
class Eta:
    """The tune's remaining time."""

    seconds: float
    """Estimated seconds left."""
    restarts_left: int
    """Restarts still expected (the current one included if it has not started measuring)."""


def estimate_eta(
    restarts_left: int,
    levels_left: int,
    startup_s: Sequence[float],
    level_s: Sequence[float],
    default_startup_s: float = 600.0,
    default_level_s: float = 60.0,
) -> Eta:
    """Remaining restarts x the median startup + remaining levels x the median level duration.

    `startup_s` is the host's startup history (and the tune's own restarts so far), `level_s` the
    durations of the levels measured so far; the defaults apply only when there is no history at all.
    """

    def median(values: Sequence[float], default: float) -> float:
        if not values:
            return default
        ordered = sorted(values)
        mid = len(ordered) // 2
        return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2

    seconds = restarts_left * median(startup_s, default_startup_s) + levels_left * median(level_s, default_level_s)
    return Eta(seconds, restarts_left)


def verify_ramp(levels: Sequence[int], threshold: int | None) -> tuple[int, ...]:
    """The verification's levels: the tune's levels plus the threshold and the level just above it.

    At `threshold + 1` concurrent streams the running batch moves between `threshold` and `threshold + 1`
    as requests finish and arrive: a batch-size schedule switches on almost every step there.
    """
    extra = set() if not threshold else {threshold, threshold + 1}
    return tuple(sorted({*levels, *extra}))


def reference_at(curve: Mapping[int, Point], c: int) -> Point | None:
    """The curve at `c`, interpolated linearly in log C between measured levels (None outside them)."""
    if c in curve:
        return curve[c]
    below = [x for x in curve if x < c]
    above = [x for x in curve if x > c]
    if not below or not above:
        return None
    lo, hi = max(below), min(above)
    t = (math.log(c) - math.log(lo)) / (math.log(hi) - math.log(lo))
    a, b = curve[lo], curve[hi]
    return Point(a.median + t * (b.median - a.median), a.spread + t * (b.spread - a.spread), min(a.n, b.n))


@dataclass(frozen=True)
class VerifyLevel:
    """One level of a verification."""

    concurrency: int
    """C."""
    tok_s: float | None
    """Measured tok/s of the exported mode (None: not measured, e.g. after a crash)."""
    reference: float | None
    """The best of the fixed setting and the baseline at C (tune's medians, interpolated)."""
    spread: float
    """The allowed shortfall: the reference's spread plus the noise floor of the measurement."""

    @property
    def ok(self) -> bool | None:
        """No worse than the reference within the spread (None when either side is missing)."""
        if self.tok_s is None or self.reference is None:
            return None
        return self.tok_s >= self.reference - self.spread

    def to_json(self) -> dict[str, object]:
        """Plain data."""
        return {
            "c": self.concurrency,
            "tok_s": self.tok_s,
            "reference": self.reference,
            "spread": self.spread,
            "ok": self.ok,
        }


def verify_levels(
    measured: Mapping[int, float],
    ramp: Sequence[int],
    fixed: Mapping[int, Point] | None,
    baseline: Mapping[int, Point],
    noise_floor: float = NOISE_FLOOR,
) -> list[VerifyLevel]:
    """Compare the exported mode's levels with the best fixed setting (or the baseline, if better) at each C.

    A schedule must do at least as well as the best *fixed* choice at each load: the fixed speculative
    setting where it pays, plain decoding where it does not.
    """
    out = []
    for c in ramp:
        refs = [p for p in (reference_at(fixed or {}, c), reference_at(baseline, c)) if p is not None]
        ref = max(refs, key=lambda p: p.median) if refs else None
        value = measured.get(c)
        spread = (ref.spread if ref else 0.0) + noise_floor * (value or 0.0)
        out.append(VerifyLevel(c, value, ref.median if ref else None, spread))
    return out


def eta_text(seconds: float) -> str:
    """A tune's ETA as people say it: `40 s`, `12 min`, `1.8 h` (the CLI's lines and the Tune view)."""
    seconds = max(0.0, seconds)
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


TUNE_OWNS: dict[str, str] = {
    "start": "starting a mode",
    "stop": "stopping the server",
    "restart": "restarting the server",
    "switch": "switching modes",
    "adopt": "adopting a server",
    "sweep": "a sweep",
    "ab": "an A/B",
    "cancel_sweep": "cancelling its sweep",
    "greedy": "a greedy check",
}
"""What a running tune owns, by the viewer's action name: starting, stopping and switching the server (the
tune restarts it per setting), and loading it (a sweep, an A/B or a greedy check would skew its levels), with
how to say it. While a tune runs, these are refused for anyone but the tune (`tune_refusal`)."""


def tune_refusal(tune: str, action: str) -> str | None:
    """Why `action` is refused while the tune `tune` runs (None: the tune does not own it), naming the way
    out: cancelling the tune in the Tune view."""
    what = TUNE_OWNS.get(action)
    if what is None:
        return None
    return (
        f"Tune {tune} is running and restarts the server for each setting: {what} is refused until it ends. "
        "To stop the tune: T, then c (finished levels are kept)."
    )
