"""The tune's search loop (`specdash.server.tune.TuneRunner.run`) over recorded figures: which settings each
pass measures and what the result says was dropped. The restart itself (`_measure`) is replaced by one that
records the figures a real run measured, so only the pure search logic runs here; the real restarts are in
tests/integration/test_tune_demo.py (simulator) and tests/engine/test_engine_cli.py (vLLM)."""

from __future__ import annotations

from pathlib import Path

from specdash.config import HostConfig, parse
from specdash.engines.registry import names
from specdash.engines.spec_settings import SpecSetting
from specdash.remote.options import SSHOptions
from specdash.remote.ssh import SSHHost
from specdash.server.remote_session import RemoteSession
from specdash.server.tune import Journal, TunePlan, TuneRunner, TuneState

CONFIG = """
[modes.plain]
engine = "vllm"
model = "/m"
port = 18000

[modes.ngram]
extends = "plain"
args = ["--speculative-config", '{"method":"ngram","num_speculative_tokens":4}']
"""
# tok/s per pass of the real vLLM CPU tune of 2026-12-02 04:28 UTC (benchmarks/RESULTS.md): after pass 1, k2
# and k1 are dominated (k2 by baseline and k4); pass 2's slower baseline and k4 clear k2 on the final medians.
FIGURES = {
    "baseline": [{1: 82.3, 4: 243.6, 16: 752.8}, {1: 63.9, 4: 169.5, 16: 735.6}],
    "k2": [{1: 73.5, 4: 237.3, 16: 687.2}],
    "k1": [{1: 67.8, 4: 204.7, 16: 632.5}],
    "k4": [{1: 69.5, 4: 267.8, 16: 434.2}, {1: 82.9, 4: 209.2, 16: 604.6}],
}


async def test_a_setting_dropped_after_a_pass_stays_dropped_in_the_result(tmp_path: Path) -> None:
    cfg = parse(CONFIG, tmp_path / "config.toml", engines=names())
    address = "u@127.0.0.1:1"  # never connected: the search loop is all that runs
    session = RemoteSession(SSHHost(address, SSHOptions()), HostConfig(name="h", address=address), cfg)
    plan = TunePlan(
        name="t", host="h", base_mode="ngram", baseline_mode="plain", engine="vllm", space="k=1,2,4",
        levels=(1, 4, 16), repeats=2, order=(SpecSetting(k=2), SpecSetting(k=1), SpecSetting(k=4)), skipped=(),
    )  # fmt: skip
    state = TuneState()
    runner = TuneRunner(session, plan, Journal(tmp_path / "t.jsonl"), state, session.sweep_defaults, None)  # type: ignore[arg-type]
    measured: list[tuple[str, int]] = []

    async def measure(candidate: str, repeat: int, levels: list[int]) -> None:
        measured.append((candidate, repeat))
        state.restarts += 1
        for c in levels:
            state.values.setdefault(candidate, {}).setdefault(repeat, {}).setdefault(c, {})[0] = FIGURES[candidate][
                repeat
            ][c]

    runner._measure = measure  # type: ignore[method-assign]
    result = await runner.run()
    assert measured == [("baseline", 0), ("k2", 0), ("k1", 0), ("k4", 0), ("baseline", 1), ("k4", 1)]
    assert set(result.dropped) == {"k1", "k2"}  # k2 is no longer dominated at the end, but it was dropped
    assert result.restarts == 6 and plan.full_grid_restarts == 8 and result.restarts_saved == 2
