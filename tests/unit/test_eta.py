from __future__ import annotations

import pytest

from specdash.core.eta import PACE_RANGE, estimate, phase_medians
from specdash.phases import Phase

P = Phase
RUN = {"launching": 2.0, "loading weights": 10.0, "capturing CUDA graphs": 100.0, "warming up": 8.0}
# A 9-minute start: launching is 1.4 s of it.
LONG = {"launching": 1.4, "loading weights": 300.0, "capturing CUDA graphs": 200.0, "warming up": 38.6}


def test_no_history_means_no_estimate() -> None:
    assert estimate([], {}, P.LOADING_WEIGHTS, 1.0) is None


def test_at_launch_the_estimate_is_the_median_total() -> None:
    e = estimate([RUN, RUN], {}, P.LAUNCHING, 0.0)
    assert e is not None
    assert e.remaining == pytest.approx(120.0)
    assert e.samples == 2


def test_during_launching_the_clock_counts_down_from_the_history() -> None:
    e = estimate([RUN], {}, P.LAUNCHING, 1.5)
    assert e is not None and e.remaining == pytest.approx(120.0 - 1.5)


def test_median_ignores_one_odd_start() -> None:
    odd = {**RUN, "capturing CUDA graphs": 1000.0}
    assert phase_medians([RUN, odd, RUN])[P.CAPTURING_GRAPHS] == 100.0


def test_remaining_shrinks_inside_a_phase() -> None:
    finished = {P.LAUNCHING: 2.0, P.LOADING_WEIGHTS: 10.0}
    e = estimate([RUN], finished, P.CAPTURING_GRAPHS, 40.0)
    assert e is not None
    assert e.remaining == pytest.approx(60.0 + 8.0)


def test_a_short_noisy_phase_cannot_move_a_long_estimate_by_minutes() -> None:
    # Launching took 3.4 s instead of 1.4 s: 2 s of a 540 s start. The old ratio rule doubled the ETA.
    e = estimate([LONG] * 5, {P.LAUNCHING: 3.4}, P.LOADING_WEIGHTS, 0.0)
    assert e is not None
    expected_left = 540.0 - 1.4
    assert abs(e.remaining - expected_left) < 3.0


def test_a_slow_run_weighs_by_its_share_of_the_start() -> None:
    # Twice as slow over 12 s of a 120 s start: the rest is scaled by 1 + 12/120.
    finished = {P.LAUNCHING: 4.0, P.LOADING_WEIGHTS: 20.0}
    e = estimate([RUN], finished, P.CAPTURING_GRAPHS, 0.0)
    assert e is not None
    assert e.remaining == pytest.approx(108.0 * 1.1)


def test_once_most_of_the_start_is_behind_its_pace_counts_fully() -> None:
    # Everything but warmup took twice as long: 224 s spent where 112 were expected.
    finished = {P.LAUNCHING: 4.0, P.LOADING_WEIGHTS: 20.0, P.CAPTURING_GRAPHS: 200.0}
    e = estimate([RUN], finished, P.WARMING_UP, 0.0)
    assert e is not None
    assert e.remaining == pytest.approx(8.0 * (1 + 112.0 / 120.0))


def test_pace_is_clamped() -> None:
    finished = {P.LAUNCHING: 2.0, P.LOADING_WEIGHTS: 10_000.0}
    e = estimate([RUN], finished, P.CAPTURING_GRAPHS, 0.0)
    assert e is not None and e.remaining == pytest.approx(108.0 * PACE_RANGE[1])


def test_an_overrunning_phase_makes_the_estimate_grow() -> None:
    finished = {P.LAUNCHING: 2.0}
    at_median = estimate([RUN], finished, P.LOADING_WEIGHTS, 10.0)
    overrun = estimate([RUN], finished, P.LOADING_WEIGHTS, 40.0)
    assert at_median is not None and overrun is not None
    assert at_median.remaining == pytest.approx(108.0)
    assert overrun.remaining > at_median.remaining


def test_progress_bar_is_blended_in() -> None:
    # Half the shards in 20 s: the bar says 20 s more, history says half of its 10 s at this run's pace.
    e = estimate([RUN], {P.LAUNCHING: 2.0}, P.LOADING_WEIGHTS, 20.0, fraction=0.5)
    assert e is not None
    pace = 1 + (22.0 - 7.0) / 120.0
    assert e.remaining == pytest.approx(0.5 * 20.0 + 0.5 * (5.0 * pace) + 108.0 * pace)


def test_spread_comes_from_the_history() -> None:
    runs = [{**RUN, "capturing CUDA graphs": c} for c in (90.0, 100.0, 110.0)]
    e = estimate(runs, {}, P.LAUNCHING, 0.0)
    assert e is not None and e.spread == pytest.approx(10.0)
    halfway = estimate(runs, {P.LAUNCHING: 2.0, P.LOADING_WEIGHTS: 10.0}, P.CAPTURING_GRAPHS, 50.0)
    assert halfway is not None and halfway.spread == pytest.approx(5.0)


def test_one_start_gives_no_spread() -> None:
    e = estimate([RUN], {}, P.LAUNCHING, 0.0)
    assert e is not None and e.spread is None


def test_ready_has_nothing_left() -> None:
    e = estimate([RUN], {P.LAUNCHING: 2.0}, P.READY, 0.0)
    assert e is not None and e.remaining == 0.0


def test_engine_order_decides_what_is_still_to_come() -> None:
    from specdash.engines.registry import make_rules

    vllm = make_rules("vllm").startup_order
    history = [{"loading weights": 10.0, "loading draft model": 5.0, "allocating KV cache": 3.0, "warming up": 2.0}]
    # vLLM loads the drafter before the KV cache: from the drafter on, KV and warmup remain.
    e = estimate(history, {P.LOADING_WEIGHTS: 10.0}, P.LOADING_DRAFT, 0.0, order=vllm)
    assert e is not None and e.remaining == pytest.approx(5.0 + 3.0 + 2.0)
