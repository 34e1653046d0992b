from __future__ import annotations

import pytest

from specdash.core.eta import estimate, phase_medians
from specdash.core.models import Phase

P = Phase
RUN = {"launching": 2.0, "loading weights": 10.0, "capturing CUDA graphs": 100.0, "warming up": 8.0}


def test_no_history_means_no_estimate() -> None:
    assert estimate([], {}, P.LOADING_WEIGHTS, 1.0) is None


def test_at_launch_the_estimate_is_the_median_total() -> None:
    e = estimate([RUN, RUN], {}, P.LAUNCHING, 0.0)
    assert e is not None
    assert e.remaining == pytest.approx(120.0)
    assert e.samples == 2


def test_median_ignores_one_odd_start() -> None:
    odd = {**RUN, "capturing CUDA graphs": 1000.0}
    assert phase_medians([RUN, odd, RUN])[P.CAPTURING_GRAPHS] == 100.0


def test_remaining_shrinks_inside_a_phase() -> None:
    finished = {P.LAUNCHING: 2.0, P.LOADING_WEIGHTS: 10.0}
    e = estimate([RUN], finished, P.CAPTURING_GRAPHS, 40.0)
    assert e is not None
    assert e.remaining == pytest.approx(60.0 + 8.0)


def test_slow_run_scales_the_rest() -> None:
    finished = {P.LAUNCHING: 4.0, P.LOADING_WEIGHTS: 20.0}  # twice as slow as history
    e = estimate([RUN], finished, P.CAPTURING_GRAPHS, 0.0)
    assert e is not None
    assert e.remaining == pytest.approx(2 * 108.0)


def test_progress_bar_is_blended_in() -> None:
    # Half the shards in 20 s says 20 s more; history (10 s total) says 0 more; blend at 50 %.
    e = estimate([RUN], {P.LAUNCHING: 2.0}, P.LOADING_WEIGHTS, 20.0, fraction=0.5)
    assert e is not None
    assert e.remaining == pytest.approx(0.5 * 20.0 + 0.5 * 0.0 + 108.0)


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
