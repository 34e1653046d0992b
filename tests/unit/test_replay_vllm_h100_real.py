"""Replaying the real vLLM 0.24.0 logs from the lent H100 (tests/fixtures/logs/vllm_h100_real/, recorded by
benchmarks/real_gpu.py; how each was made is in its label) gives their true phases and outcomes.

Each class issue 26 found on the real GPU has a test on a real log here: the compile phase (cold and from its
cache), capture ending where vLLM says and the silent seconds after it as warm-up, no draft phase for n-gram
(which prints `Loading drafter model...`), EAGLE-3's draft load and capture with shards counted per model, the
crash reason keeping pydantic's field and value lines, and durations counted from the launch when it is known.
The labels were written by reading each log, not by running specdash on it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specdash.core.timeline import Timeline, replay_file

REAL = Path(__file__).parent.parent / "fixtures" / "logs" / "vllm_h100_real"
LABELS: dict[str, dict[str, Any]] = {
    k: v for k, v in json.loads((REAL / "labels.json").read_text()).items() if not k.startswith("_")
}
STAGE = {"launching": "launching", "allocating_kv_cache": "allocating KV cache", "ready": "ready"}


def replay(name: str, launched: bool = True) -> Timeline:
    with (REAL / name).open("rb") as fh:
        return replay_file(fh, "auto", LABELS[name]["launched"] if launched else None)


def spans(timeline: Timeline) -> dict[str, float]:
    return {span.phase.value: (span.end or 0.0) - span.start for span in timeline.spans}


def test_every_real_gpu_log_has_a_label() -> None:
    assert {p.name for p in REAL.glob("*.log")} == set(LABELS)


@pytest.mark.parametrize("name", sorted(LABELS))
def test_replay_matches_the_label(name: str) -> None:
    want = LABELS[name]
    timeline = replay(name)
    assert timeline.engine == want["engine"]
    assert timeline.outcome.value == want["outcome"], timeline.reason
    assert timeline.highest_phase.value == STAGE[want["furthest"]]
    if "phases" in want:
        assert [span.phase.value for span in timeline.spans] == want["phases"]
    if "reason" in want:
        assert want["reason"] in (timeline.reason or "")
        for detail in want.get("detail", []):
            assert detail in (timeline.reason or ""), timeline.reason
    for phase, shards in want.get("shards", {}).items():
        progress = next(span.progress for span in timeline.spans if span.phase.value == phase)
        assert progress is not None and f"{progress.done}/{progress.total}" == shards


def test_compile_is_its_own_phase_cold_and_from_the_cache() -> None:
    cold = spans(replay("vllm_h100_0240_baseline_cold_compile_sleep_wake_sigterm.log"))
    warm = spans(replay("vllm_h100_0240_ngram_restart_warm_compile_cache_sigterm.log"))
    # vLLM: `torch.compile took 12.42 s` cold, 2.48 s from the cache; the weights took 0.27 s to read.
    assert cold["compiling"] >= 9 and cold["loading weights"] <= 8
    assert warm["compiling"] <= 3


def test_capture_ends_where_vllm_says_and_the_silence_after_it_is_warm_up() -> None:
    base = spans(replay("vllm_h100_0240_baseline_cold_compile_sleep_wake_sigterm.log"))
    # `Graph capturing finished in 3 secs`, then 16 s without a line until `init engine ... took`.
    assert base["capturing CUDA graphs"] <= 4
    assert base["warming up"] >= 12


def test_ngram_has_no_draft_phase_and_eagle3_has_its_draft_load_and_capture() -> None:
    ngram = replay("vllm_h100_0240_ngram_sleep_wake_sigterm.log")
    assert "Loading drafter model" in (REAL / "vllm_h100_0240_ngram_sleep_wake_sigterm.log").read_text()
    assert "loading draft model" not in spans(ngram)
    eagle = spans(replay("vllm_h100_0240_eagle3_random_draft_sigterm.log"))
    assert "loading draft model" in eagle and "capturing draft graphs" in eagle


def test_a_validation_crash_keeps_the_field_and_the_value() -> None:
    reason = replay("vllm_h100_0240_crash_max_model_len_negative.log").reason or ""
    assert "ModelConfig" in reason and "max_model_len" in reason and "input_value=-5" in reason
    assert "errors.pydantic.dev" not in reason  # the link line is not the reason


@pytest.mark.parametrize(
    "name",
    ["vllm_h100_0240_crash_max_model_len_negative.log", "vllm_h100_0240_baseline_cold_compile_sleep_wake_sigterm.log"],
)
def test_durations_count_from_the_launch_when_it_is_known(name: str) -> None:
    want = LABELS[name]["seconds_from_launch"]
    with_launch, without = replay(name), replay(name, launched=False)
    total, log_only = with_launch.total(), without.total()
    assert total is not None and log_only is not None
    assert abs(total - want) <= 2.5  # to the exit, or to ready; the log's clock has whole seconds
    # Python's imports before the first line: 15-20 s that the log alone cannot show.
    assert total >= log_only + 15
