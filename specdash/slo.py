"""Service-level objectives: per level attainment, goodput, and the largest concurrency that meets them (pure).

An SLO is a list of targets such as `ttft_p90=500ms,tpot_p90=50ms`: "90 % of requests get their first token
within 500 ms, and 90 % decode at 50 ms per token or better" (the form of vLLM's `--goodput` and
`bench sweep serve_sla`).

Per level (`evaluate_level`), with every request sent in the level counted (a failed request misses every
target, reference/measurement.md §8):

| figure | definition |
|---|---|
| target share | requests whose metric is within the target's limit / requests sent |
| level meets the SLO | every target's share ≥ its percentile (share ≥ 0.90 for `_p90`) |
| attainment | requests within every limit at once / requests sent |
| request goodput | requests within every limit / level wall time (req/s) |
| token goodput | output tokens of those requests / level wall time (tok/s) |

A request without a TPOT (one output token) meets a TPOT target: it had no decode to be slow in.
The largest C meeting the SLO (`max_concurrency_meeting`) is the largest level such that it and every
measured level below it meet the SLO: a capacity figure has to hold for all loads up to it.
The crossover "under the SLO" is `core.compare.compute_crossover` on the token-goodput curves.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

METRICS: dict[str, str] = {
    "ttft": "time to first token",
    "tpot": "time per output token",
    "itl": "mean inter-token latency of the request (= TPOT)",
    "e2e": "end-to-end latency",
}
"""The metrics a target can name (all in milliseconds per request)."""

_TARGET = re.compile(r"^(?P<metric>[a-z0-9]+)_p(?P<pct>\d{1,2}(?:\.\d+)?)$")
_VALUE = re.compile(r"^(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>ms|s)?$")


class SloError(ValueError):
    """An SLO string that does not parse; the message says which part and why."""


@dataclass(frozen=True)
class Target:
    """One objective: `percentile` % of requests have `metric` ≤ `limit_ms`."""

    metric: str
    """`ttft`, `tpot`, `itl` or `e2e`."""
    percentile: float
    """e.g. 90 for `_p90`."""
    limit_ms: float
    """The limit in milliseconds."""

    @property
    def label(self) -> str:
        """`ttft_p90≤500ms`."""
        return f"{self.metric}_p{self.percentile:g}≤{self.limit_ms:g}ms"


@dataclass(frozen=True)
class Slo:
    """A set of targets that must all hold."""

    targets: tuple[Target, ...]
    """At least one."""

    @property
    def text(self) -> str:
        """`ttft_p90≤500ms, tpot_p90≤50ms`."""
        return ", ".join(t.label for t in self.targets)

    def spec(self) -> str:
        """The form `parse_slo` reads (`ttft_p90=500ms,tpot_p90=50ms`), for storing with a run."""
        return ",".join(f"{t.metric}_p{t.percentile:g}={t.limit_ms:g}ms" for t in self.targets)


def parse_slo(text: str) -> Slo:
    """`ttft_p90=500ms,tpot_p90=50ms` -> `Slo`; a value without a unit is in ms, `s` is seconds.

    Raises:
        SloError: naming the part that is wrong.
    """
    targets: list[Target] = []
    seen: set[tuple[str, float]] = set()
    parts = [p.strip() for p in text.split(",")]
    if not any(parts):
        raise SloError("empty SLO; expected e.g. ttft_p90=500ms,tpot_p90=50ms")
    for part in parts:
        if not part:
            raise SloError(f"empty target in {text!r}")
        name, sep, value = part.partition("=")
        m = _TARGET.match(name.strip().lower())
        if not sep or m is None:
            raise SloError(f"{part!r}: expected METRIC_pNN=VALUE, e.g. ttft_p90=500ms")
        metric, pct = m["metric"], float(m["pct"])
        if metric not in METRICS:
            raise SloError(f"{part!r}: unknown metric {metric!r} (known: {', '.join(METRICS)})")
        if not 0 < pct < 100:
            raise SloError(f"{part!r}: the percentile must be between 0 and 100")
        v = _VALUE.match(value.strip().lower())
        if v is None:
            raise SloError(f"{part!r}: expected a positive duration such as 500ms or 0.5s")
        limit = float(v["num"]) * (1000.0 if v["unit"] == "s" else 1.0)
        if not (limit > 0 and math.isfinite(limit)):
            raise SloError(f"{part!r}: the limit must be positive")
        if (metric, pct) in seen:
            raise SloError(f"{part!r}: {metric}_p{pct:g} given twice")
        seen.add((metric, pct))
        targets.append(Target(metric, pct, limit))
    return Slo(tuple(targets))


@dataclass(frozen=True)
class Outcome:
    """What the SLO needs of one request."""

    ok: bool
    """False for a failed request (it misses every target)."""
    ttft_ms: float | None = None
    """Time to first token."""
    tpot_ms: float | None = None
    """Time per output token after the first (None with one token)."""
    e2e_ms: float | None = None
    """End-to-end latency."""
    output_tokens: int = 0
    """Tokens it generated."""

    def value(self, metric: str) -> float | None:
        """The request's value of `metric` (`itl` is the request's mean inter-token latency, = TPOT)."""
        return {"ttft": self.ttft_ms, "tpot": self.tpot_ms, "itl": self.tpot_ms, "e2e": self.e2e_ms}[metric]

    def meets(self, target: Target) -> bool:
        """Within the target's limit (a failed request never is; a missing TPOT/ITL is)."""
        if not self.ok:
            return False
        v = self.value(target.metric)
        if v is None:
            return target.metric in ("tpot", "itl")
        return v <= target.limit_ms


@dataclass(frozen=True)
class TargetResult:
    """One target at one level."""

    target: Target
    """The target."""
    share: float
    """Requests within its limit / requests sent."""
    observed_ms: float | None
    """The level's value at the target's percentile over successful requests (for display)."""

    @property
    def met(self) -> bool:
        """share ≥ percentile / 100."""
        return self.share >= self.target.percentile / 100.0 - 1e-12


@dataclass(frozen=True)
class LevelSlo:
    """A level against the SLO."""

    concurrency: int
    """Nominal C."""
    sent: int
    """Requests sent (failed ones included)."""
    good: int
    """Requests within every limit."""
    good_tokens: int
    """Output tokens of those requests."""
    wall_s: float
    """The level's wall time."""
    targets: tuple[TargetResult, ...]
    """Per target."""

    @property
    def meets(self) -> bool:
        """Every target holds (and at least one request was sent)."""
        return self.sent > 0 and all(t.met for t in self.targets)

    @property
    def attainment(self) -> float:
        """good / sent (0 with nothing sent)."""
        return self.good / self.sent if self.sent else 0.0

    @property
    def request_goodput(self) -> float:
        """Good requests per second."""
        return self.good / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def token_goodput(self) -> float:
        """Output tokens of good requests per second."""
        return self.good_tokens / self.wall_s if self.wall_s > 0 else 0.0

    def to_json(self) -> dict[str, object]:
        """A JSON-ready summary."""
        return {
            "concurrency": self.concurrency,
            "meets": self.meets,
            "attainment": self.attainment,
            "request_goodput": self.request_goodput,
            "token_goodput": self.token_goodput,
            "sent": self.sent,
            "good": self.good,
            "targets": {
                t.target.label: {"share": t.share, "observed_ms": t.observed_ms, "met": t.met} for t in self.targets
            },
        }


def _percentile(values: Sequence[float], pct: float) -> float | None:
    """Linear-interpolated percentile (numpy's default), None without values."""
    if not values:
        return None
    ordered = sorted(values)
    k = (len(ordered) - 1) * pct / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def evaluate_level(outcomes: Iterable[Outcome], concurrency: int, wall_s: float, slo: Slo) -> LevelSlo:
    """Attainment and goodput of one level (see the module docstring)."""
    items = list(outcomes)
    sent = len(items)
    good = [o for o in items if all(o.meets(t) for t in slo.targets)]
    results = []
    for t in slo.targets:
        within = sum(1 for o in items if o.meets(t))
        observed = _percentile([v for o in items if o.ok and (v := o.value(t.metric)) is not None], t.percentile)
        results.append(TargetResult(t, within / sent if sent else 0.0, observed))
    return LevelSlo(concurrency, sent, len(good), sum(o.output_tokens for o in good), wall_s, tuple(results))


def max_concurrency_meeting(levels: Iterable[LevelSlo]) -> int | None:
    """The largest C such that it and every lower measured level meet the SLO; None if the lowest does not."""
    best = None
    for lv in sorted(levels, key=lambda lv: lv.concurrency):
        if not lv.meets:
            break
        best = lv.concurrency
    return best


def goodput_curve(levels: Iterable[LevelSlo]) -> dict[int, float]:
    """C -> token goodput, for `compute_crossover` under the SLO."""
    return {lv.concurrency: lv.token_goodput for lv in levels}


def capacity_text(slo: Slo, per_mode: Mapping[str, int | None]) -> str:
    """`under ttft_p90≤500ms: eagle3 meets it up to C=10, baseline up to C=20`."""
    parts = [
        f"{mode} up to C={c}" if c is not None else f"{mode} not even at its lowest level"
        for mode, c in per_mode.items()
    ]
    return f"SLO {slo.text}: met by " + ", ".join(parts)
