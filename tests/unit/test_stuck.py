"""Stuck-phase limits: configured, from this mode's history on this host, or the defaults; and the tracker's
warning says which rule fired."""

from __future__ import annotations

from specdash.core.startup import StartupTracker
from specdash.core.startup_events import Stuck
from specdash.core.stuck import DEFAULT_STUCK_TIMEOUTS, StuckPolicy, phase_named, stuck_limits
from specdash.phases import Phase

HISTORY = [
    {"loading weights": 96.2, "capturing CUDA graphs": 41.0, "dist-init": 7.9},
    {"loading weights": 101.5, "capturing CUDA graphs": 38.0, "dist-init": 8.4},
    {"loading weights": 90.0, "capturing CUDA graphs": 52.5},
]


def test_history_sets_three_times_the_slowest_with_a_floor() -> None:
    limits = stuck_limits(HISTORY)
    capture = limits[Phase.CAPTURING_GRAPHS]
    assert capture.seconds == 3 * 52.5
    assert capture.rule == "3x the slowest of 3 recorded starts (52 s), floor 120 s"
    assert limits[Phase.LOADING_WEIGHTS].seconds == 3 * 101.5
    # dist-init took 8 s: 3x is 25 s, but the floor keeps a normal pause from counting as stuck.
    assert limits[Phase.DIST_INIT].seconds == 120.0
    assert "of 2 recorded starts" in limits[Phase.DIST_INIT].rule
    # Never recorded: the generous default.
    assert limits[Phase.WARMING_UP].seconds == DEFAULT_STUCK_TIMEOUTS[Phase.WARMING_UP]
    assert limits[Phase.WARMING_UP].rule.startswith("default")


def test_a_configured_limit_wins_over_history_and_factor_and_floor_apply() -> None:
    policy = StuckPolicy(factor=2.0, floor=30.0, fixed={Phase.CAPTURING_GRAPHS: 1800.0})
    limits = stuck_limits(HISTORY, policy)
    assert limits[Phase.CAPTURING_GRAPHS].seconds == 1800.0
    assert "set for this mode" in limits[Phase.CAPTURING_GRAPHS].rule
    assert limits[Phase.DIST_INIT].seconds == 30.0  # 2 x 8.4 s is below the floor
    assert limits[Phase.LOADING_WEIGHTS].rule == "2x the slowest of 3 recorded starts (102 s), floor 30 s"


def test_a_slow_box_gets_more_than_the_default() -> None:
    limits = stuck_limits([{"loading weights": 1500.0}])
    assert limits[Phase.LOADING_WEIGHTS].seconds == 4500.0 > DEFAULT_STUCK_TIMEOUTS[Phase.LOADING_WEIGHTS]


def test_phase_names_in_config_spellings() -> None:
    assert phase_named("capturing CUDA graphs") is Phase.CAPTURING_GRAPHS
    assert phase_named("capturing-cuda-graphs") is Phase.CAPTURING_GRAPHS
    assert phase_named("dist_init") is Phase.DIST_INIT
    assert phase_named("ready") is None and phase_named("compiling") is None


def test_the_warning_says_which_rule_fired() -> None:
    tracker = StartupTracker("sglang", started_at=0.0, stuck_limits=stuck_limits(HISTORY))
    tracker.feed("[2025-12-23 14:18:01] Load weight begin. avail mem=46.81 GB\n", now=10.0)
    assert tracker.tick(now=10.0 + 3 * 101.5) == []
    (stuck,) = tracker.tick(now=10.0 + 3 * 101.5 + 1)
    assert isinstance(stuck, Stuck)
    assert stuck.reason == (
        "no progress in loading weights for 306 s (limit 304 s: 3x the slowest of 3 recorded starts (102 s), "
        "floor 120 s)"
    )
