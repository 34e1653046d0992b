"""The simulator tells the seed's story at the seed's flags (issue 26 point 3), measured by the probe against a
real simulator process: baseline near 70 tok/s per request at C = 1 and saturating near 773 tok/s, EAGLE-3 at
(2 steps, top-k 4, 16 draft tokens), the demo's `eagle3` mode, near 82 tok/s at C = 1 (the seed saw 80-84)
and saturating near 354 tok/s; EAGLE-3 wins at C = 1 only. Each figure is held to 5 %.

Steady-state rates (the sweep's `output_tok_s`, its steady window) at C = 100, the seed's high level; decode
runs at real speed in the simulator, so a level takes about 20 s.

Every request of every level must finish. At C = 100 with EAGLE-3, SGLang runs at most 48 requests (its
default `--max-running-requests` under speculation): the other 52 wait in its queue with no byte sent, the
last 4 for two whole rounds of 256 tokens at about 354 / 48 tok/s each (about 70 s). The stall limit is set
above that wait (QUEUE_WAIT_S): a stall there would be the client giving up on a healthy queue, not a fault.
"""

from __future__ import annotations

import pytest

from specdash.bench.probe import ProbeSettings
from specdash.bench.prompts import load_prompts
from specdash.bench.sse import Endpoint
from specdash.bench.sweep import SweepResult, run_sweep
from specdash.bench.sweep_data import SweepConfig
from specdash.sim.model import SPEC_MAX_RUNNING
from specdash.sim.spec_space import CALIBRATION_FLAGS
from tests.integration.test_probe_sim import start_sim, stop_sim

SEED_EAGLE3 = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d", *CALIBRATION_FLAGS]
HIGH = 100
OUTPUT_LEN = 256
QUEUE_WAIT_S = (-(-HIGH // SPEC_MAX_RUNNING) - 1) * OUTPUT_LEN / (354 / SPEC_MAX_RUNNING)
"""Longest wait in SGLang's queue at C = HIGH with EAGLE-3: whole rounds of the 48 running requests (~69 s)."""


async def sweep(extra: list[str]) -> SweepResult:
    proc, url = start_sim(extra)
    try:
        config = SweepConfig(
            mode="seed",
            levels=(1, HIGH),
            duration_s=20.0,
            warmup_requests=None,
            metrics_poll_s=1.0,
            settings=ProbeSettings(
                endpoint=Endpoint.GENERATE,
                output_len=OUTPUT_LEN,
                stall_timeout_s=2 * QUEUE_WAIT_S,
                request_timeout_s=4 * QUEUE_WAIT_S,
            ),
        )
        return await run_sweep(url, config, load_prompts("chat"))
    finally:
        stop_sim(proc)


async def test_the_seeds_four_figures_at_the_seeds_flags() -> None:
    base = await sweep([])
    spec = await sweep(SEED_EAGLE3)
    for res in (base, spec):
        assert res.aborted is None
        got = [
            (lv.concurrency, lv.status, lv.stats.completed, lv.stats.failures, lv.stats.output_tok_s)
            for lv in res.levels
        ]
        assert all(lv.status == "done" and lv.stats.completed > 0 and lv.stats.failed == 0 for lv in res.levels), got
    b1 = base.levels[0].stats.per_request_tok_s.p50
    s1 = spec.levels[0].stats.per_request_tok_s.p50
    b_high, s_high = base.levels[1].stats.output_tok_s, spec.levels[1].stats.output_tok_s
    assert b1 is not None and s1 is not None
    assert b1 == pytest.approx(70, rel=0.05)
    assert s1 == pytest.approx(82, rel=0.05)
    assert b_high == pytest.approx(773, rel=0.05)
    assert s_high == pytest.approx(354, rel=0.05)
    assert s1 > b1 and s_high < b_high  # EAGLE-3 wins at C = 1 only
