"""core.series: percentiles, rolling rates, per-second buckets, steady-state windows."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specdash.core.series import (
    NS_PER_S,
    Percentiles,
    RateWindow,
    SecondBuckets,
    Window,
    achieved_concurrency,
    percentile,
    steady_state_window,
    tokens_in_window,
)

S = NS_PER_S


def test_percentile_interpolates_like_numpy() -> None:
    vals = [1.0, 2.0, 3.0, 4.0]
    assert percentile(vals, 0) == 1.0
    assert percentile(vals, 100) == 4.0
    assert percentile(vals, 50) == 2.5
    assert percentile(vals, 90) == pytest.approx(3.7)
    assert percentile([], 50) is None
    assert percentile([7.0], 99) == 7.0


@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=50), st.floats(0, 100), st.floats(0, 100))
def test_percentile_is_bounded_and_monotone(vals: list[float], p: float, q: float) -> None:
    a, b = percentile(vals, min(p, q)), percentile(vals, max(p, q))
    assert a is not None and b is not None
    assert min(vals) - 1e-6 <= a <= b + 1e-9 <= max(vals) + 1e-6


def test_percentiles_summary() -> None:
    p = Percentiles.of([10.0] * 9 + [100.0])
    assert p.count == 10
    assert p.mean == pytest.approx(19.0)
    assert p.p50 == 10.0
    assert p.p99 is not None and p.p99 > 90
    assert p.std == pytest.approx(27.0)
    empty = Percentiles.of([])
    assert empty.count == 0 and empty.p50 is None and empty.mean is None


def test_rate_window_credits_tokens_not_chunks_and_trims() -> None:
    w = RateWindow(window_s=1.0)
    # Three chunks of 4 tokens (a speculative verify step each) in the first second.
    for i in range(3):
        w.add(i * S // 10, 4)
    assert w.rate(S // 2) == pytest.approx(12.0)
    # One second later the old credits have left the window and the deque is trimmed.
    w.add(2 * S, 5)
    assert w.rate(2 * S) == pytest.approx(5.0)
    assert len(w) == 1


@given(st.lists(st.tuples(st.integers(0, 10 * S), st.integers(1, 8)), max_size=60), st.integers(0, 11 * S))
def test_rate_window_matches_brute_force(items: list[tuple[int, int]], now: int) -> None:
    items.sort()
    w = RateWindow(window_s=2.0)
    for t, tok in items:
        w.add(t, tok)
    now = max(now, items[-1][0] if items else 0)
    expected = sum(tok for t, tok in items if now - 2 * S < t <= now) / 2.0
    assert w.rate(now) == pytest.approx(expected)


def test_rate_window_rejects_non_positive_width() -> None:
    with pytest.raises(ValueError):
        RateWindow(0)


def test_second_buckets_peak_late_credits_and_bound() -> None:
    b = SecondBuckets(origin_ns=0, keep=3)
    b.add(0, 3)
    b.add(S // 2, 3)
    b.add(S + 1, 10)
    b.add(S // 3, 1)  # late credit for second 0 from another worker
    assert b.items() == [(0, 7), (1, 10)]
    assert b.peak() == 10
    for sec in range(2, 6):
        b.add(sec * S, 1)
    assert [s for s, _ in b.items()] == [3, 4, 5]


def test_steady_state_excludes_ramp_up_and_drain() -> None:
    # C=2, closed loop: first wave starts at 0 and 10; replacements follow ends; drain from 300.
    intervals = [(0, 100), (10, 110), (100, 200), (110, 210), (200, 300), (210, 320)]
    w = steady_state_window(intervals, concurrency=2)
    assert w == Window(10, 300, steady=True)
    assert w.seconds == pytest.approx(290 / S)


def test_steady_state_falls_back_when_concurrency_never_reached() -> None:
    w = steady_state_window([(0, 100), (150, 200)], concurrency=2)
    assert w == Window(0, 200, steady=False)
    assert steady_state_window([], 4) is None


def test_steady_state_single_stream_is_whole_level() -> None:
    w = steady_state_window([(0, 100), (100, 200), (200, 300)], concurrency=1)
    assert w is not None and (w.start_ns, w.end_ns) == (0, 300) and w.steady


def test_tokens_in_window_and_achieved_concurrency() -> None:
    # One stream started at 0: 3 tokens over (0, 5], 4 over (5, 10], 5 over (10, 20].
    stream = [(0, [(5, 3), (10, 4), (20, 5)])]
    assert tokens_in_window(stream, Window(0, 20)) == pytest.approx(12)
    assert tokens_in_window(stream, Window(5, 10)) == pytest.approx(4)  # the gap (5, 10] only
    assert tokens_in_window(stream, Window(15, 20)) == pytest.approx(2.5)  # half of the last gap
    assert achieved_concurrency([100, 100, 50], 125) == pytest.approx(2.0)
    assert achieved_concurrency([100], 0) == 0.0


def test_steady_state_opens_when_the_first_wave_is_generating() -> None:
    """One-shot level, C=2: both requests start at 0, their prefill ends (first token) at 30 and 40; the
    window opens at 40, not at the sends: the first wave's prefill is ramp-up."""
    intervals = [(0, 1000), (0, 900)]
    assert steady_state_window(intervals, 2) == Window(0, 900, steady=True)
    assert steady_state_window(intervals, 2, [30, 40]) == Window(40, 900, steady=True)
    assert steady_state_window(intervals, 2, [30, None]) == Window(30, 900, steady=True)  # a failed one
    # The second request is queued by the server until the first finishes: steady state, not ramp-up.
    assert steady_state_window([(0, 900), (0, 1800), (0, 1900)], 3, [30, 40, 950]) == Window(40, 900, steady=True)


def test_a_window_closing_mid_step_loses_no_step() -> None:
    """Two streams decoding in lockstep, one token each per 10 ns step; stream A's last token is at 100, B's
    at 101 (the same step, delivered a moment later). A window (0, 100] gets 19.9 tokens (B's last one was
    generated over (91, 101], 90 % inside), where counting whole chunks at arrival gives 19: a lost step."""
    a = (0, [(t, 1) for t in range(10, 101, 10)])
    b = (0, [(t + 1, 1) for t in range(10, 101, 10)])
    assert tokens_in_window([a, b], Window(0, 100)) == pytest.approx(19 + 9 / 10)
    assert tokens_in_window([a, b], Window(0, 200)) == pytest.approx(20)
