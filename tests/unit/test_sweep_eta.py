"""A sweep's expected duration before it starts, and its countdown (`core.eta`)."""

from __future__ import annotations

from specdash.core.eta import countdown_text, sweep_estimate


def test_an_ab_from_its_restart_history_and_its_levels() -> None:
    estimate = sweep_estimate([("eagle3", (29.0, 31.0, 33.0, 30.0, 35.0, 400.0))], 6, 9.0)
    assert estimate.seconds == 31.0 + 54.0  # the median of the last five starts: the oldest outlier is out
    assert estimate.text() == "about 1m 25s: eagle3 restart ~31s from 5 starts + 6 levels x 9s"


def test_what_is_unknown_is_said_not_invented() -> None:
    never = sweep_estimate([("eagle3", ())], 6, 9.0)
    assert never.seconds is None
    assert never.text() == "no estimate: restart time unknown: no start of eagle3 recorded + 6 levels x 9s"
    counted = sweep_estimate([], 4, None)
    assert counted.seconds is None and "4 levels of unknown length" in counted.text()
    live = sweep_estimate([], 1, 30.0)  # the live server measured as it runs: no restart
    assert live.text() == "about 30s: 1 level x 30s"


def test_the_countdown_goes_down_then_says_overdue() -> None:
    assert countdown_text(85.0, 10.0) == "about 1m 15s left"
    assert countdown_text(85.0, 85.0) == "about 0s left"
    assert countdown_text(85.0, 97.0) == "overdue by 12s"
    assert countdown_text(None, 65.0) == "running 1m 05s, no estimate"
