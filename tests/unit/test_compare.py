"""core.compare: per-level ratios and the crossover concurrency."""

from __future__ import annotations

import math

import pytest

from specdash.bench.text_tables import repeats_table
from specdash.core.compare import CrossoverKind, Spread, compute_crossover, level_ratios, pool_runs


def test_crossover_interpolates_in_log_concurrency() -> None:
    base = {1: 70.0, 2: 140.0, 4: 260.0, 16: 700.0}
    spec = {1: 175.0, 2: 280.0, 4: 320.0, 16: 560.0}
    x = compute_crossover(base, spec)
    assert x.kind is CrossoverKind.CROSSES
    # r(4) = 320/260 = 1.2308, r(16) = 0.8: crossing at fraction 0.2308/0.4308 of ln4..ln16.
    r4, r16 = 320 / 260, 0.8
    expected = math.exp(math.log(4) + (r4 - 1) / (r4 - r16) * (math.log(16) - math.log(4)))
    assert x.concurrency == pytest.approx(expected)
    assert 4 < expected < 16
    assert x.disable_above == math.floor(expected)


def test_first_crossing_wins_over_noise_above() -> None:
    base = {1: 100.0, 2: 100.0, 4: 100.0, 8: 100.0}
    spec = {1: 200.0, 2: 90.0, 4: 101.0, 8: 80.0}
    x = compute_crossover(base, spec)
    assert x.kind is CrossoverKind.CROSSES
    assert x.concurrency is not None and 1 < x.concurrency < 2


def test_margin_ignores_small_wins() -> None:
    base = {1: 100.0, 2: 100.0, 4: 100.0}
    spec = {1: 150.0, 2: 103.0, 4: 102.0}
    assert compute_crossover(base, spec).kind is CrossoverKind.ABOVE_RANGE
    with_margin = compute_crossover(base, spec, margin=0.05)
    assert with_margin.kind is CrossoverKind.CROSSES
    assert with_margin.concurrency is not None and 1 < with_margin.concurrency < 2


def test_kinds_without_a_crossing() -> None:
    pays = compute_crossover({1: 1.0, 8: 1.0}, {1: 2.0, 8: 1.5})
    assert pays.kind is CrossoverKind.ABOVE_RANGE and pays.concurrency is None and pays.disable_above == 8
    never = compute_crossover({1: 2.0, 8: 2.0}, {1: 1.0, 8: 3.0})
    assert never.kind is CrossoverKind.NEVER_PAYS and never.disable_above == 0
    none = compute_crossover({1: 1.0}, {2: 1.0})
    assert none.kind is CrossoverKind.NO_DATA and none.disable_above is None


def test_exact_tie_at_a_level_is_the_crossover() -> None:
    x = compute_crossover({1: 100.0, 10: 100.0}, {1: 200.0, 10: 100.0})
    assert x.kind is CrossoverKind.CROSSES
    assert x.concurrency == pytest.approx(10.0)


def test_ratios_use_common_levels_only() -> None:
    ratios = level_ratios({1: 10.0, 2: 20.0, 5: 50.0}, {2: 30.0, 5: 25.0, 10: 1.0})
    assert [r.concurrency for r in ratios] == [2, 5]
    assert [r.ratio for r in ratios] == [1.5, 0.5]
    assert math.isinf(level_ratios({1: 0.0}, {1: 5.0})[0].ratio)


def test_pooled_repeats_give_median_and_mad_per_level() -> None:
    pooled = pool_runs([{1: 120.0, 2: 188.0}, {1: 110.0, 2: 192.0}, {1: 90.0}, {1: 104.0, 2: 190.0}])
    # level 1: 90, 104, 110, 120 -> median 107; deviations 17, 3, 3, 13 -> MAD (3 + 13) / 2 = 8
    assert pooled[1] == Spread(median=107.0, mad=8.0, low=90.0, high=120.0, n=4)
    assert pooled[2] == Spread(median=190.0, mad=2.0, low=188.0, high=192.0, n=3)  # level 2 missing in one run
    assert pooled[1].noisy  # 8 / 107 > 5 %
    assert not pooled[2].noisy
    assert not Spread(100.0, 50.0, 50.0, 150.0, 2).noisy  # two runs cannot tell


def test_repeats_table_shows_spread_and_the_crossover_on_medians() -> None:
    base = pool_runs([{1: 70.0, 5: 260.0}, {1: 71.0, 5: 262.0}, {1: 69.0, 5: 258.0}])
    spec = pool_runs([{1: 82.0, 5: 220.0}, {1: 80.0, 5: 224.0}, {1: 81.0, 5: 221.0}])
    text = repeats_table(["baseline", "eagle3"], [base, spec])
    assert "70.0 ± 1.0 (3)" in text and "81.0 ± 1.0 (3)" in text and "1.16x" in text
    assert "eagle3 beats baseline up to C≈" in text, text


def test_levels_where_both_modes_are_at_zero_are_a_tie_not_a_win() -> None:
    """Goodput 0 for both modes (a level beyond both SLOs) is no win for either; only a zero reference with a
    non-zero other is one, and the verdict says "from 0", not "infx"."""
    from specdash.core.compare import LevelRatio, compute_crossover
    from specdash.core.verdict import crossover_sentence

    assert LevelRatio(20, 0.0, 0.0).ratio == 1.0
    x = compute_crossover({1: 70.0, 5: 260.0, 20: 0.0}, {1: 120.0, 5: 215.0, 20: 0.0})
    text = crossover_sentence("eagle3", "baseline", x, "in goodput")
    assert "again" not in text and "inf" not in text, text
    x = compute_crossover({1: 70.0, 5: 260.0, 20: 0.0}, {1: 120.0, 5: 215.0, 20: 5.0})
    assert "and again at C=20 (from 0)" in crossover_sentence("eagle3", "baseline", x, "in goodput")


def test_the_speedup_strip_says_what_the_charts_would() -> None:
    from specdash.core.verdict import speedup_strip

    curves = {"baseline": {1: 100.0, 4: 300.0}, "eagle3": {1: 180.0, 4: 240.0}}
    assert speedup_strip(curves, 2.4) == "eagle3/baseline  C=1 1.80×  C=4 0.80×  · crossover C≈2.4"
    assert speedup_strip({"baseline": {1: 100.0, 4: 1200.0}}) == "baseline tok/s  C=1 100  C=4 1,200"
    assert speedup_strip({}) == ""
