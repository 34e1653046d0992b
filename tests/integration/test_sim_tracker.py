"""The simulator's real output, fed to specdash's own startup tracker, reaches READY (or the right crash).

This closes the loop between the two sides that were written from the same reference: what the simulator
prints (specdash.sim) and what the tracker understands (specdash.core.startup + engines.sglang).
"""

from __future__ import annotations

import pytest

from specdash.core.startup import StartupTracker
from specdash.core.startup_events import Crashed, PhaseChanged, ProgressChanged, Ready
from specdash.phases import STARTUP_ORDER, Phase
from tests.support.sim_harness import Simulators


@pytest.mark.parametrize("style", ["sglang-0.5", "sglang-2026"])
@pytest.mark.parametrize("spec", [True, False])
async def test_tracker_follows_a_simulated_start_to_ready(sim: Simulators, style: str, spec: bool) -> None:
    extra = ["--speculative-algorithm", "EAGLE3"] if spec else []
    proc = await sim("--model-path", "/models/kimi", "--tp", "4", "--sim-log-style", style, *extra)
    await proc.wait_for("The server is fired up and ready to roll!", 30)
    tracker = StartupTracker("sglang")
    events = tracker.feed(proc.raw) + tracker.finish()
    assert tracker.internal_errors == 0
    assert tracker.phase is Phase.READY
    assert not any(isinstance(e, Crashed) for e in events)
    phases = [e.phase for e in events if isinstance(e, PhaseChanged)]
    assert phases == sorted(phases, key=STARTUP_ORDER.index), "phases only move forward"
    expected = {Phase.LOADING_WEIGHTS, Phase.CAPTURING_GRAPHS, Phase.WARMING_UP, Phase.READY}
    if spec:
        expected |= {Phase.LOADING_DRAFT, Phase.CAPTURING_DRAFT_GRAPHS}
    assert expected <= set(phases), phases
    shards = [e.progress for e in events if isinstance(e, ProgressChanged) and e.phase is Phase.LOADING_WEIGHTS]
    assert shards and shards[-1].done == shards[-1].total == 64
    assert sum(isinstance(e, Ready) for e in events) == 1


@pytest.mark.parametrize(
    ("fault", "reason"),
    [("oom-at-capture", "CUDA out of memory"), ("port-in-use", "address already in use")],
)
async def test_tracker_reports_simulated_crashes(sim: Simulators, fault: str, reason: str) -> None:
    proc = await sim("--model-path", "/models/kimi", "--tp", "2", "--sim-fault", fault)
    code = await proc.wait_exit(30)
    await proc.wait_for(r"^$", 10)  # the harness marks end of output with an empty line
    tracker = StartupTracker("sglang")
    events = tracker.feed(proc.raw) + tracker.process_exited(code, 0.0) + tracker.finish()
    crashes = [e for e in events if isinstance(e, Crashed)]
    assert tracker.phase is Phase.CRASHED and crashes
    assert reason in crashes[0].info.reason, crashes[0].info
