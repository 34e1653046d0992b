"""The tune's search loop (`specdash.tune.runner.TuneRunner.run`) over recorded figures: which settings each
pass measures and what the result says was dropped. The restart itself (`_measure`) is replaced by one that
records the figures a real run measured, so only the pure search logic runs here; the real restarts are in
tests/integration/test_tune_demo.py (simulator) and tests/engine/test_engine_cli.py (vLLM)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from specdash.bench.sweep import SweepConfig
from specdash.config import HostConfig, parse
from specdash.engines.registry import names
from specdash.engines.spec_settings import SpecSetting
from specdash.errors import SpecdashError
from specdash.phases import CrashInfo, Phase
from specdash.remote.events import ConnectionState
from specdash.remote.options import SSHOptions
from specdash.remote.ssh import SSHHost
from specdash.server.remote_session import RemoteSession
from specdash.tune.job import hold_level
from specdash.tune.journal import Journal, TuneState
from specdash.tune.plan import TunePlan
from specdash.tune.runner import TuneRunner

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


def session_and_plan(tmp_path: Path) -> tuple[RemoteSession, TunePlan]:
    """A session that is never connected (the search loop is all that runs) and a 3-setting, 2-pass plan."""
    cfg = parse(CONFIG, tmp_path / "config.toml", engines=names())
    address = "u@127.0.0.1:1"
    session = RemoteSession(SSHHost(address, SSHOptions()), HostConfig(name="h", address=address), cfg)
    plan = TunePlan(
        name="t", host="h", base_mode="ngram", baseline_mode="plain", engine="vllm", space="k=1,2,4",
        levels=(1, 4, 16), repeats=2, order=(SpecSetting(k=2), SpecSetting(k=1), SpecSetting(k=4)), skipped=(),
    )  # fmt: skip
    return session, plan


def runner_for(
    tmp_path: Path, state: TuneState, duration_s: float = 30.0, history: tuple[float, ...] = ()
) -> TuneRunner:
    session, plan = session_and_plan(tmp_path)
    sweep = replace(session.sweep_defaults, duration_s=duration_s)
    journal = Journal(tmp_path / "t.jsonl")
    return TuneRunner(session, plan, journal, state, sweep, None, history_startup_s=history)  # type: ignore[arg-type]


async def test_a_setting_dropped_after_a_pass_stays_dropped_in_the_result(tmp_path: Path) -> None:
    state = TuneState()
    runner = runner_for(tmp_path, state)
    plan = runner.plan
    measured: list[tuple[str, int]] = []

    async def measure(candidate: str, repeat: int, levels: list[int]) -> None:
        measured.append((candidate, repeat))
        state.apply({"type": "startup", "candidate": candidate, "repeat": repeat, "seconds": 30.0})
        for c in levels:
            state.values.setdefault(candidate, {}).setdefault(repeat, {}).setdefault(c, {})[0] = FIGURES[candidate][
                repeat
            ][c]

    runner._measure = measure  # type: ignore[method-assign]
    result = await runner.run()
    assert measured == [("baseline", 0), ("k2", 0), ("k1", 0), ("k4", 0), ("baseline", 1), ("k4", 1)]
    assert set(result.dropped) == {"k1", "k2"}  # k2 is no longer dominated at the end, but it was dropped
    assert result.restarts == 6 and plan.full_grid_restarts == 8 and result.restarts_saved == 2
    records = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    drops = [r["candidate"] for r in records if r.get("type") == "drop"]
    assert drops == ["k2", "k1"], "the drops are journaled: a resumed tune knows them"


def test_restarts_skipped_by_a_cancel_are_not_saved(tmp_path: Path) -> None:
    """Cancelled in pass 1 after two of its four restarts: nothing was saved, whatever the full grid says."""
    runner = runner_for(tmp_path, TuneState())
    for name in ("baseline", "k2"):
        runner.state.apply({"type": "startup", "candidate": name, "repeat": 0, "seconds": 30.0})
    result = runner.snapshot()
    assert result.restarts == 2 and runner.plan.full_grid_restarts == 8
    assert result.restarts_saved == 0
    # A setting that crashed in pass 1 is not restarted in pass 2: saved once pass 2 has begun, not before.
    runner.state.apply({"type": "crash", "candidate": "k2", "repeat": 0, "c": 4, "reason": "boom"})
    assert runner.snapshot().restarts_saved == 0
    runner.state.apply({"type": "startup", "candidate": "baseline", "repeat": 1, "seconds": 30.0})
    assert runner.snapshot().restarts_saved == 1


def test_the_eta_is_unknown_before_any_start_then_does_not_jump(tmp_path: Path) -> None:
    """No start of the mode on the host: no number (a guess of 10 min a start made it say hours, then
    minutes). Known starts: restarts x the median start + levels x the configured level duration, so the
    first measured level (as long as configured) moves it by that level's time, not by a factor."""
    fresh = runner_for(tmp_path, TuneState(), duration_s=10.0)
    order = fresh._pass_candidates(0)  # noqa: SLF001
    assert fresh.eta(0, 0, order) is None
    runner = runner_for(tmp_path, TuneState(), duration_s=10.0, history=(30.0,))
    before = runner.eta(0, 0, order)
    assert before is not None
    # pass 1: 4 restarts x 3 levels; pass 2: the baseline and the 3 settings still in contention
    assert before.seconds == (4 + 4) * 30.0 + (12 + 12) * 10.0
    runner.state.apply({"type": "startup", "candidate": "baseline", "repeat": 0, "seconds": 30.0})
    runner.state.apply({"type": "level", "candidate": "baseline", "repeat": 0, "c": 1, "tok_s": 80.0, "seconds": 10.0})
    after = runner.eta(0, 0, order)
    assert after is not None and after.seconds == before.seconds - 10.0


async def test_a_crash_is_put_on_the_level_it_came_at_after_a_level_that_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """C=1 failed without a crash (a timeout on a busy machine: it stays missing), then the server crashed at
    C=16: the crash is journaled at 16, the level being measured, not at the first level still missing (ci15
    recorded the tune demo's crash at the wrong level this way)."""
    runner = runner_for(tmp_path, TuneState())
    session = runner.session
    monkeypatch.setattr(SSHHost, "state", property(lambda _host: ConnectionState.CONNECTED))
    measured: list[int] = []

    async def restart(candidate: str, mode: str, repeat: int) -> None:
        pass

    async def level(candidate: str, mode: str, repeat: int, c: int) -> None:
        measured.append(c)
        if c == 16:
            session._status = replace(session.status, phase=Phase.CRASHED, crash=CrashInfo("RuntimeError: boom"))
            raise SpecdashError("k2 crashed during the sweep; finished levels are kept")

    runner._restart = restart  # type: ignore[method-assign]
    runner._level = level  # type: ignore[method-assign]
    await runner._measure("k2", 0, [1, 4, 16])
    assert measured == [1, 4, 16]
    records = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    (crash,) = [r for r in records if r.get("type") == "crash"]
    assert (crash["candidate"], crash["c"], crash["reason"]) == ("k2", 16, "RuntimeError: boom")


async def test_the_restart_after_a_crashed_setting_cleans_up_what_it_left_first(tmp_path: Path) -> None:
    """The last setting crashed (nothing runs, as far as the status says): the next restart stops what the crash
    left before it starts, as `x` does after a crash; the host refuses a start while any of it lives. A failed
    clean-up is said, and the start still runs (its refusal names what is left)."""
    runner = runner_for(tmp_path, TuneState())
    session = runner.session
    calls: list[str] = []
    progress: list[str] = []
    runner.on_event = lambda event: progress.append(event.text)

    async def stop() -> None:
        calls.append("stop")
        if len(calls) > 2:
            raise SpecdashError("stopping run r1 on h failed: ssh: connection reset")

    async def start(mode: str) -> None:
        calls.append(f"start {mode}")

    async def wait_ready(mode: str) -> object:
        return replace(session.status, phase=Phase.READY, mode=mode)

    session.stop = stop  # type: ignore[method-assign]
    session.start = start  # type: ignore[method-assign]
    session.wait_ready = wait_ready  # type: ignore[method-assign,assignment]
    session._status = replace(session.status, phase=Phase.CRASHED, crash=CrashInfo("RuntimeError: boom"))
    await runner._restart("k2", "ngram", 0)
    assert calls == ["stop", "start ngram"]
    await runner._restart("k1", "ngram", 0)  # the status still says CRASHED (the stubs leave it): stop fails
    assert calls[2:] == ["stop", "start ngram"]
    assert any("cleaning up after the last crash" in line and "connection reset" in line for line in progress)
    session._status = replace(session.status, phase=Phase.STOPPED, crash=None)
    await runner._restart("k4", "ngram", 0)
    assert calls[4:] == ["start ngram"], "nothing to clean up after a clean stop"


def test_the_verifications_hold_is_counted_as_the_tunes_levels() -> None:
    """`--hold 3` is three levels long: in seconds when the levels run for a duration, in requests when the tune
    was given `--requests-per-level` (it ran 30 s whatever the levels were), 30 s a level when neither is set."""

    timed = hold_level(SweepConfig(duration_s=2.0), 3.0)
    assert (timed.duration_s, timed.requests_per_level) == (6.0, None)
    counted = hold_level(SweepConfig(requests_per_level=4), 2.5)
    assert (counted.duration_s, counted.requests_per_level) == (None, 10)
    assert hold_level(SweepConfig(requests_per_level=1), 0.1).requests_per_level == 1
    default = hold_level(SweepConfig(), 3.0)
    assert (default.duration_s, default.requests_per_level) == (90.0, None)
