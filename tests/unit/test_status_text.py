"""Every display derives from one ServerStatus: the texts agree with each other and with the state."""

from __future__ import annotations

import pytest

from specdash.core.events import ServerStatus
from specdash.core.status_text import (
    RECORD_KINDS,
    badge,
    eta_phrase,
    headless_line,
    headless_progress,
    is_live,
    leftovers_text,
    look,
    mode_marker,
    stop_question,
    sweep_plan,
    sweep_question,
    title,
)
from specdash.phases import CrashInfo, Origin, Phase, Progress

BASE = ServerStatus(Phase.READY, mode="baseline", engine="sglang", pid=123, port=30000, started_at=1000.0)
CRASHED = ServerStatus(Phase.CRASHED, mode="baseline", pid=123, crash=CrashInfo("RuntimeError: boom"))
STOPPED = ServerStatus(Phase.STOPPED, mode="baseline", pid=123)


@pytest.mark.parametrize(
    ("status", "marker", "panel", "header"),
    [
        (BASE, "● ready", "● READY", "server: ready"),
        (CRASHED, "✖ crashed", "✖ CRASHED", "server: crashed"),
        (STOPPED, "○ stopped", "○ STOPPED", "server: stopped"),
        (ServerStatus(Phase.STOPPING, mode="baseline"), "◑ stopping", "◑ STOPPING", "server: stopping"),
        (ServerStatus(Phase.LOADING_WEIGHTS, mode="baseline"), "◐ loading weights", "◐ LOADING WEIGHTS", None),
    ],
)
def test_mode_list_panel_and_header_say_the_same(
    status: ServerStatus, marker: str, panel: str, header: str | None
) -> None:
    assert mode_marker(status, "baseline") == marker
    assert title(status) == panel
    assert badge(status)[0] == (header or f"server: {status.phase.value}")
    assert "running" not in mode_marker(status, "baseline")


def test_other_modes_get_no_marker_and_nothing_before_the_session_looked() -> None:
    assert mode_marker(BASE, "eagle3") == ""
    assert mode_marker(ServerStatus(Phase.STOPPED, origin=Origin.UNKNOWN), "") == ""
    assert look(ServerStatus(Phase.STOPPED, origin=Origin.UNKNOWN)).key == "unknown"


def test_origin_shows_in_the_title_and_headless_line() -> None:
    attached = ServerStatus(Phase.READY, mode="baseline", pid=5, started_at=0.0, origin=Origin.ATTACHED)
    assert title(attached) == "● READY · attached"
    assert headless_line(attached, 140.0) == "[ 2m20s] ready (attached; pid 5)"


def test_headless_starts_with_a_real_state() -> None:
    # Before the session looked, and when it looked and found nothing, there is no made-up "stopped".
    assert headless_line(ServerStatus(Phase.STOPPED, origin=Origin.UNKNOWN), 0.0) is None
    assert headless_line(ServerStatus(Phase.STOPPED, origin=Origin.NONE), 0.0) is None
    launching = ServerStatus(Phase.LAUNCHING, mode="baseline", started_at=10.0, origin=Origin.LAUNCHED)
    assert headless_line(launching, 10.0) == "[    0s] launching"


def test_headless_crash_line_names_the_reason() -> None:
    line = headless_line(CRASHED, 0.0)
    assert line is not None and line.endswith("crashed (pid 123; RuntimeError: boom)")


def test_eta_phrase_shows_the_spread_and_the_count() -> None:
    s = ServerStatus(Phase.LOADING_WEIGHTS, eta_remaining=430.0, eta_samples=5, eta_spread=20.0)
    assert eta_phrase(s) == "ready in 7m 10s ± 20s, from 5 starts"
    one = ServerStatus(Phase.LOADING_WEIGHTS, eta_remaining=30.0, eta_samples=1)
    assert eta_phrase(one) == "ready in ~30s, from 1 start"
    assert eta_phrase(ServerStatus(Phase.LAUNCHING)) == "ETA: no history yet"
    # Identical past starts (a simulator) have no spread to state: "about", never "± 0s".
    same = ServerStatus(Phase.LOADING_WEIGHTS, eta_remaining=28.0, eta_samples=3, eta_spread=0.0)
    assert eta_phrase(same) == "ready in ~28s, from 3 starts"


def test_the_demo_host_is_named_for_its_clock() -> None:
    """The startup history is kept per host and mode: a start at the tour's clock must not predict one at
    the demo's (it said "ready in 4s" for a 28 s start)."""
    from specdash.cli.demo_session import TIME_SCALE, TOUR_TIME_SCALE, demo_host_name

    assert demo_host_name(TIME_SCALE) == "demo"
    assert demo_host_name(TOUR_TIME_SCALE) != demo_host_name(TIME_SCALE)


def test_headless_progress_line() -> None:
    s = ServerStatus(Phase.LOADING_WEIGHTS, progress=Progress(29, 64, "shard"), eta_remaining=10.0, eta_samples=2)
    assert headless_progress(s).split() == ["29/64", "shard", "45%", "ready", "in", "~10s,", "from", "2", "starts"]
    assert headless_progress(BASE) == ""


def test_only_a_watched_launch_is_recorded_as_a_startup() -> None:
    assert RECORD_KINDS == {Origin.LAUNCHED: "startup", Origin.ATTACHED: "attach", Origin.ADOPTED: "adoption"}


def test_plan_measures_the_live_mode_and_restarts_for_the_rest() -> None:
    plan = sweep_plan(BASE, ["baseline", "eagle3"])
    assert [(s.mode, s.action) for s in plan] == [("baseline", "measure"), ("eagle3", "restart")]
    plan = sweep_plan(BASE, ["eagle3", "baseline"])
    assert [(s.mode, s.action, s.stops) for s in plan] == [
        ("eagle3", "restart", "baseline (pid 123)"),
        ("baseline", "restart", "eagle3"),
    ]
    assert [s.action for s in sweep_plan(STOPPED, ["baseline", "eagle3"])] == ["start", "restart"]
    # A crashed or stopping server is not measured as it runs.
    assert sweep_plan(CRASHED, ["baseline"])[0].action == "start"


def test_ab_dialog_says_what_the_plan_does() -> None:
    q = sweep_question(BASE, ["baseline", "eagle3"], "gpu")
    assert (
        q == "A/B baseline vs eagle3 on gpu: measures baseline as it runs (pid 123, no restart), "
        "then restarts into eagle3."
    )
    q = sweep_question(BASE, ["eagle3", "baseline"], "gpu")
    assert q is not None and q.startswith("A/B eagle3 vs baseline on gpu: stops baseline (pid 123) and starts eagle3")
    # Nothing live: nothing of the user's is stopped, nothing to confirm (and no claim of a restart).
    assert sweep_question(STOPPED, ["baseline", "eagle3"], "gpu") is None
    assert sweep_question(BASE, ["baseline"], "gpu") is None


def test_stop_question_for_an_adopted_server_names_pid_and_command() -> None:
    adopted = ServerStatus(
        Phase.READY,
        mode="adopted-77",
        pid=77,
        origin=Origin.ADOPTED,
        command=("python", "-m", "sglang.launch_server", "--model-path", "/m x"),
    )
    q = stop_question(adopted, "gpu", grace=30)
    assert "pid 77" in q and "python -m sglang.launch_server --model-path '/m x'" in q
    assert "did not start" in q and "SIGKILL after 30 s" in q


def test_leftovers_are_listed_with_the_way_to_clean_them_up() -> None:
    left = ServerStatus(Phase.CRASHED, mode="b", leftovers=("4242 VLLM::Worker",), crash=CrashInfo("x"))
    assert "4242 VLLM::Worker" in leftovers_text(left, "gpu") and "specdash down gpu" in leftovers_text(left, "gpu")
    assert "4242 VLLM::Worker" in stop_question(left, "gpu")
    assert leftovers_text(CRASHED, "gpu") == ""


def test_live_means_starting_or_ready() -> None:
    assert is_live(BASE) and is_live(ServerStatus(Phase.LAUNCHING))
    assert not any(is_live(s) for s in (CRASHED, STOPPED, ServerStatus(Phase.STOPPING)))
