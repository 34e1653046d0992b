"""The simulator's throughput model: how long one scheduler step takes and how many tokens it yields.

A decode step over a running batch of `bs` requests costs `step_ms(bs) = a + b * bs` milliseconds. Plain
decoding yields one token per request per step; a speculative (EAGLE-style) step yields a per-request
*accepted length* `L` in `1 .. num_steps + 1`, drawn so that each successive draft token is accepted with
probability `p` (chain acceptance), with `p` solved so that the mean of `L` is the calibrated mean.
Saturation comes from `b` (the step grows with the batch) and, for speculation, from SGLang's cap of 48
running requests; requests above the cap queue.

Calibration (Kimi K2.5, TP=8, measured in the field): baseline ~70 tok/s per request at C=1 and 773 tok/s
aggregate at C=100; EAGLE-3 ~82 tok/s at C=1 saturating at ~354 tok/s (48 running), crossover C≈2.4.

| mode     | a (ms) | b (ms/req) | mean accept len | max running | source          |
|----------|-------:|-----------:|----------------:|------------:|-----------------|
| baseline | 13.123 |     1.1624 |             1.0 |   unlimited | fitted (above)  |
| EAGLE3   | 21.053 |     5.7761 |             2.2 |          48 | fitted (above)  |
| EAGLE    | 21.053 |     5.7761 |             2.0 |          48 | guess (no data) |
| STANDALONE | 27.0 |     6.5    |             2.4 |          48 | guess (no data) |
| NGRAM    | 14.5   |     1.45   |             1.5 |          48 | guess (no data) |

For EAGLE and EAGLE-3 the simulator derives `a`, `b` and the mean accepted length from the draft
parameters (`specdash.sim.spec_space`): the EAGLE-3 row is the seed's setting (steps, topk, draft) =
(2, 4, 16), also the demo's `eagle3` mode, which carries the calibration; other settings (e.g. SGLang's
default (3, 1, 4)) differ.

Derivation: baseline `a + b = 1000/70`, `a + 100 b = 100000/773`; EAGLE-3 `(a + b) = 2.2 * 1000/82`,
`a + 48 b = 48 * 2.2 * 1000/354`.

Expected steady-state aggregate decode tok/s (`expected_aggregate`, prefill excluded; per request = /C):

| C   | baseline agg | baseline /req | EAGLE-3 agg | EAGLE-3 /req |
|----:|-------------:|--------------:|------------:|-------------:|
|   1 |         70.0 |          70.0 |        82.0 |         82.0 |
|   2 |        129.5 |          64.7 |       134.9 |         67.5 |
|   5 |        264.1 |          52.8 |       220.3 |         44.1 |
|  10 |        404.1 |          40.4 |       279.1 |         27.9 |
|  20 |        549.9 |          27.5 |       322.2 |         16.1 |
|  50 |        701.8 |          14.0 |       354.0 |          7.1 |
| 100 |        773.0 |           7.7 |       354.0 |          3.5 |

(`python -m specdash.sim.model` prints this table from the code.)

Prefill costs `prefill_base_ms + prefill_ms_per_token * new_tokens` and yields each new request's first
token; it runs as its own batch between decode steps, as SGLang does. Time scale (`--sim-time-scale`) does
not touch these numbers: decode runs at real speed even in the demo. `--sim-speed` divides every step
time, for stress tests only.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class StepCost:
    """Linear step cost `a + b * bs` in milliseconds, and the mean accepted length per step."""

    a_ms: float
    """Fixed cost of one forward pass (kernel launches, all-reduce latency, draft chain for spec)."""
    b_ms: float
    """Extra cost per running request (KV reads, MoE expert traffic, verify tokens for spec)."""
    mean_accept: float = 1.0
    """Mean tokens a request gains per step (1.0 for plain decoding, bonus token included for spec)."""

    def step_ms(self, bs: int) -> float:
        """Milliseconds one step over `bs` running requests takes."""
        return self.a_ms + self.b_ms * bs


BASELINE = StepCost(a_ms=13.1233, b_ms=1.16243)
EAGLE3 = StepCost(a_ms=21.0528, b_ms=5.77609, mean_accept=2.2)
SPEC_COSTS: dict[str, StepCost] = {
    "EAGLE3": EAGLE3,
    "EAGLE": StepCost(a_ms=21.0528, b_ms=5.77609, mean_accept=2.0),
    "STANDALONE": StepCost(a_ms=27.0, b_ms=6.5, mean_accept=2.4),
    "NGRAM": StepCost(a_ms=14.5, b_ms=1.45, mean_accept=1.5),
}
"""Step cost per speculative algorithm (NEXTN is rewritten to EAGLE before lookup, as SGLang does)."""

SPEC_MAX_RUNNING = 48
"""SGLang's default `--max-running-requests` when speculation is on."""
BASELINE_MAX_RUNNING = 4096
"""What SGLang derives from KV memory for the big preset without speculation (effectively no cap)."""


def solve_accept_prob(mean_accept: float, num_steps: int) -> float:
    """Per-draft-token acceptance probability `p` so that `1 + p + ... + p**num_steps == mean_accept`.

    Clamped to [0, 1]: a target above `num_steps + 1` is unreachable, so every draft is accepted.
    """
    if num_steps <= 0 or mean_accept <= 1.0:
        return 0.0
    if mean_accept >= num_steps + 1:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(60):  # bisection: the mean is monotonic in p
        mid = (lo + hi) / 2
        if sum(mid**k for k in range(num_steps + 1)) < mean_accept:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@dataclass(frozen=True)
class ThroughputModel:
    """Everything the scheduler needs to time steps: costs, caps, acceptance, prefill cost."""

    baseline: StepCost = BASELINE
    """Cost of a plain decoding step (also used above `--sim-disable-spec-above`)."""
    spec: StepCost | None = None
    """Cost of a speculative step, or None without speculation."""
    num_steps: int = 3
    """Draft chain length: the accepted length is at most `num_steps + 1`."""
    max_running: int = BASELINE_MAX_RUNNING
    """Running-batch cap; requests above it wait in the queue."""
    disable_spec_above: int | None = None
    """Dynamic mode: speculate only while the running batch is at most this."""
    prefill_base_ms: float = 15.0
    """Fixed cost of a prefill batch."""
    prefill_ms_per_token: float = 0.05
    """Prefill cost per new prompt token (~20k tokens/s)."""
    speed: float = 1.0
    """`--sim-speed`: divides every step time (stress tests only)."""

    @property
    def accept_prob(self) -> float:
        """Per-draft acceptance probability that yields the calibrated mean accepted length."""
        return 0.0 if self.spec is None else solve_accept_prob(self.spec.mean_accept, self.num_steps)

    def speculating(self, bs: int) -> bool:
        """Whether a step over `bs` running requests speculates."""
        if self.spec is None:
            return False
        return self.disable_spec_above is None or bs <= self.disable_spec_above

    def step_seconds(self, bs: int) -> float:
        """Wall seconds of one decode step over `bs` running requests."""
        cost = self.spec if self.speculating(bs) and self.spec is not None else self.baseline
        return cost.step_ms(bs) / 1000.0 / self.speed

    def prefill_seconds(self, new_tokens: int) -> float:
        """Wall seconds of one prefill batch of `new_tokens` prompt tokens."""
        return (self.prefill_base_ms + self.prefill_ms_per_token * new_tokens) / 1000.0 / self.speed

    def mean_tokens_per_step(self, bs: int) -> float:
        """Expected tokens one request gains in a step over `bs` requests."""
        if not self.speculating(bs):
            return 1.0
        p = self.accept_prob
        return sum(p**k for k in range(self.num_steps + 1))

    def expected_aggregate(self, concurrency: int) -> float:
        """Steady-state aggregate decode tok/s with `concurrency` requests in flight (prefill excluded)."""
        bs = min(concurrency, self.max_running)
        if bs <= 0:
            return 0.0
        return bs * self.mean_tokens_per_step(bs) / self.step_seconds(bs)


class AcceptSampler:
    """Draws per-request accepted lengths: chain acceptance with probability `p` per draft token."""

    def __init__(self, p: float, num_steps: int, rng: random.Random) -> None:
        self._p = p
        self._steps = num_steps
        self._random = rng.random

    def draw(self) -> int:
        """One accepted length in `1 .. num_steps + 1` (the bonus token always counts)."""
        n = 1
        rand = self._random
        while n <= self._steps and rand() < self._p:
            n += 1
        return n


def baseline_model(max_running: int | None = None) -> ThroughputModel:
    """The calibrated plain-decoding model."""
    return ThroughputModel(max_running=max_running or BASELINE_MAX_RUNNING)


def eagle3_model(max_running: int | None = None, disable_spec_above: int | None = None) -> ThroughputModel:
    """The calibrated EAGLE-3 model at the seed's (2, 4, 16) draft parameters (a depth-2 tree)."""
    return ThroughputModel(
        spec=EAGLE3, num_steps=2, max_running=max_running or SPEC_MAX_RUNNING, disable_spec_above=disable_spec_above
    )


TABLE_CONCURRENCY: tuple[int, ...] = (1, 2, 5, 10, 20, 50, 100)
"""The concurrency levels of the documented table and of benchmarks/sim_throughput.py."""


def expected_table() -> list[tuple[int, float, float]]:
    """`(C, baseline aggregate, EAGLE-3 aggregate)` for the documented concurrency levels."""
    base, spec = baseline_model(), eagle3_model()
    return [(c, base.expected_aggregate(c), spec.expected_aggregate(c)) for c in TABLE_CONCURRENCY]


if __name__ == "__main__":
    print("| C | baseline agg | baseline /req | EAGLE-3 agg | EAGLE-3 /req |")
    for c, b, s in expected_table():
        print(f"| {c:3d} | {b:7.1f} | {b / c:6.1f} | {s:7.1f} | {s / c:6.1f} |")
