"""The throughput model hits the field calibration and its documented table."""

from __future__ import annotations

import random

import pytest

from specdash.sim.model import (
    AcceptSampler,
    ThroughputModel,
    baseline_model,
    eagle3_model,
    expected_table,
    solve_accept_prob,
)

# The table in specdash/sim/model.py's docstring: (C, baseline aggregate, EAGLE-3 aggregate).
DOCUMENTED = [
    (1, 70.0, 82.0),
    (2, 129.5, 134.9),
    (5, 264.1, 220.3),
    (10, 404.1, 279.1),
    (20, 549.9, 322.2),
    (50, 701.8, 354.0),
    (100, 773.0, 354.0),
]


def test_expected_table_matches_the_docstring() -> None:
    for (c, base, spec), (c2, base2, spec2) in zip(expected_table(), DOCUMENTED, strict=True):
        assert c == c2
        assert base == pytest.approx(base2, abs=0.06)
        assert spec == pytest.approx(spec2, abs=0.06)


def test_calibration_targets() -> None:
    base, spec = baseline_model(), eagle3_model()
    assert base.expected_aggregate(1) == pytest.approx(70, rel=0.01)
    assert base.expected_aggregate(100) == pytest.approx(773, rel=0.01)
    assert 80 <= spec.expected_aggregate(1) <= 84
    assert spec.expected_aggregate(48) == pytest.approx(354, rel=0.01)
    assert spec.expected_aggregate(1000) == spec.expected_aggregate(48), "capped at 48 running"


def test_crossover_between_2_and_5() -> None:
    base, spec = baseline_model(), eagle3_model()
    assert spec.expected_aggregate(2) > base.expected_aggregate(2)
    assert spec.expected_aggregate(5) < base.expected_aggregate(5)


def test_dynamic_mode_switches_to_plain_steps_above_n() -> None:
    dyn = eagle3_model(disable_spec_above=4)
    assert dyn.speculating(4) and not dyn.speculating(5)
    assert dyn.step_seconds(5) == pytest.approx(baseline_model().step_seconds(5))
    assert dyn.mean_tokens_per_step(5) == 1.0


@pytest.mark.parametrize("steps", [1, 2, 3, 5])
def test_solved_acceptance_gives_the_mean(steps: int) -> None:
    target = min(2.2, steps + 1)
    p = solve_accept_prob(target, steps)
    assert sum(p**k for k in range(steps + 1)) == pytest.approx(target, abs=1e-6)


def test_sampler_mean_and_bounds() -> None:
    p = solve_accept_prob(2.2, 3)
    sampler = AcceptSampler(p, 3, random.Random(1))
    draws = [sampler.draw() for _ in range(200_000)]
    assert min(draws) == 1 and max(draws) == 4
    assert sum(draws) / len(draws) == pytest.approx(2.2, rel=0.01)


def test_step_time_is_linear_and_speed_divides_it() -> None:
    m = ThroughputModel()
    assert m.step_seconds(11) - m.step_seconds(10) == pytest.approx(m.step_seconds(21) - m.step_seconds(20))
    fast = ThroughputModel(speed=4.0)
    assert fast.step_seconds(8) == pytest.approx(m.step_seconds(8) / 4)
    assert m.prefill_seconds(1000) > m.prefill_seconds(10) > 0
