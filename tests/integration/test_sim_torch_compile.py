"""`--enable-torch-compile` in the simulator, read by specdash's own tracker (issue 26 point 3).

SGLang compiles inside the target graph capture (no line of its own), for batch sizes up to
`--torch-compile-max-bs`; its cache dir (here `TORCHINDUCTOR_CACHE_DIR`) makes a second start's capture short.
Two real simulator processes on one cache dir: the first capture is long (cold compile), the second short.
"""

from __future__ import annotations

import os
from pathlib import Path

from specdash.core.startup import StartupTracker
from specdash.core.startup_events import PhaseChanged
from specdash.phases import Phase
from specdash.sim.presets import SMALL, capture_batch_sizes
from specdash.sim.startup import CACHED_COMPILE_SHARE, COMPILE_PER_CAPTURE
from tests.support.sim_harness import Simulators

SCALE = 0.5


async def capture_seconds(sim: Simulators, cache: Path) -> tuple[float, list[Phase]]:
    """Start one simulator with torch.compile on `cache`; the capture phase's span per the tracker, the phases."""
    args = ("--model-path", "/models/llama-8b", "--enable-torch-compile", "--sim-log-style", "sglang-2026")
    proc = await sim(*args, scale=SCALE, env={"TORCHINDUCTOR_CACHE_DIR": str(cache)})
    await proc.wait_for("The server is fired up and ready to roll!", 120)
    tracker = StartupTracker("sglang")
    events = tracker.feed(proc.raw) + tracker.finish()
    changes = [e for e in events if isinstance(e, PhaseChanged)]
    phases = [e.phase for e in changes]
    i = phases.index(Phase.CAPTURING_GRAPHS)
    await proc.close()
    return changes[i + 1].at - changes[i].at, phases


async def test_a_second_start_on_the_same_compile_cache_captures_faster(sim: Simulators, tmp_path: Path) -> None:
    cold, phases = await capture_seconds(sim, tmp_path)
    assert os.listdir(tmp_path), "the first start left its compiled graphs in the cache dir"
    warm, again = await capture_seconds(sim, tmp_path)
    assert Phase.CAPTURING_GRAPHS in phases and Phase.READY in phases and phases == again
    assert Phase.COMPILING not in phases  # SGLang prints no compile line: it compiles inside the capture
    compiled = [bs for bs in capture_batch_sizes(256) if bs <= 32]  # SGLang's default --torch-compile-max-bs
    saved = len(compiled) * SMALL.graph_per_bs_s * COMPILE_PER_CAPTURE * (1 - CACHED_COMPILE_SHARE) * SCALE
    # The log's timestamps count whole seconds: allow one second each side.
    assert cold - warm >= saved - 2, (cold, warm, saved)
    assert warm < cold
