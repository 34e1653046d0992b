"""Every fixture log through the tracker, against the labels in tests/fixtures/logs/expected.toml, and the
`specdash replay` command on top of it."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from specdash.core.lines import split_lines
from specdash.core.startup import StartupTracker
from specdash.core.startup_events import Crashed, MetricsSeen, PhaseChanged, ProgressChanged, Suspect, VersionSeen
from specdash.core.timeline import Outcome, replay_text
from specdash.engines.registry import detect_engine

LOGS = Path(__file__).parent.parent / "fixtures" / "logs"
EXPECTED: dict[str, dict[str, Any]] = tomllib.loads((LOGS / "expected.toml").read_text())


def test_every_log_has_a_label() -> None:
    on_disk = {p.relative_to(LOGS).as_posix() for p in LOGS.rglob("*.log")}
    assert on_disk == set(EXPECTED)
    assert len([name for name in on_disk if "/" not in name]) == 18


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_replay_matches_label(name: str) -> None:
    want = EXPECTED[name]
    text = (LOGS / name).read_text(encoding="utf-8")
    assert detect_engine(split_lines(text)) == want["engine"]

    timeline = replay_text(text)
    assert timeline.outcome.value == want["outcome"]
    assert timeline.highest_phase.value == want["highest"]
    if "reason" in want:
        assert want["reason"] in timeline.reason
    if "phases" in want:
        assert [span.phase.value for span in timeline.spans] == want["phases"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_events_match_label(name: str) -> None:
    want = EXPECTED[name]
    tracker = StartupTracker(want["engine"])
    events = tracker.feed((LOGS / name).read_text(encoding="utf-8")) + tracker.finish()
    assert tracker.internal_errors == 0
    progress = [f"{e.progress.done}/{e.progress.total}" for e in events if isinstance(e, ProgressChanged)]
    assert progress == want.get("progress", [])
    versions = [e.version for e in events if isinstance(e, VersionSeen)]
    assert len(versions) == len(want.get("versions", []))
    for got, expected in zip(versions, want.get("versions", []), strict=True):
        assert expected in got
    assert sum(isinstance(e, Suspect) for e in events) == want.get("suspects", 0)
    assert sum(isinstance(e, MetricsSeen) for e in events) == want.get("metrics", 0)
    assert sum(isinstance(e, Crashed) for e in events) == (1 if want["outcome"] == "crashed" else 0)


def test_crash_excerpt_keeps_the_traceback() -> None:
    timeline = replay_text((LOGS / "sglang_2468_warmup_fail_502_2024-12.log").read_text())
    assert timeline.outcome is Outcome.CRASHED
    assert any("Traceback (most recent call last)" in line for line in timeline.excerpt)
    assert timeline.excerpt[-1].startswith("AssertionError")


def test_crash_timing_from_log_clock() -> None:
    timeline = replay_text((LOGS / "sglang_2468_warmup_fail_502_2024-12.log").read_text())
    assert timeline.durations()[timeline.spans[-2].phase] == pytest.approx(3.0)  # capture 01:44:59 -> 01:45:02
    assert timeline.total() == pytest.approx(155.0)  # 01:44:59 -> crash at 01:47:34


def test_ready_timeline_gives_an_eta_history_record() -> None:
    timeline = replay_text((LOGS / "synthetic" / "sglang_v056_eagle3_tp2_ready.log").read_text())
    record = timeline.history_record()
    assert record is not None
    assert record["loading weights"] == pytest.approx(21.0)
    assert record["capturing draft graphs"] == pytest.approx(48.0)
    assert timeline.limits is not None and timeline.limits.max_running_requests == 48
    incomplete = replay_text((LOGS / "sglang_pr15426_startup_head_2025-12.log").read_text())
    assert incomplete.history_record() is None


def test_phase_events_carry_the_line() -> None:
    tracker = StartupTracker("sglang")
    events = tracker.feed((LOGS / "sglang_pr15426_startup_head_2025-12.log").read_text())
    first = next(e for e in events if isinstance(e, PhaseChanged))
    assert "Init torch distributed begin." in first.line


# -- the command ------------------------------------------------------------------------------------------


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specdash", *args], capture_output=True, text=True)


def test_cli_json_output() -> None:
    out = run_cli("replay", str(LOGS / "sglang_2468_warmup_fail_502_2024-12.log"), "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["engine"] == "sglang"
    assert data["outcome"] == "crashed"
    assert data["highest_phase"] == "warming up"
    assert data["reason"].startswith("AssertionError")
    assert [p["phase"] for p in data["phases"]] == ["allocating KV cache", "capturing CUDA graphs", "warming up"]
    assert data["phases"][-1]["state"] == "crashed"
    assert data["limits"]["max_running_requests"] == 2049


def test_cli_text_output_ready() -> None:
    out = run_cli("replay", str(LOGS / "synthetic" / "vllm_0320_eagle3_ready.log"))
    assert out.returncode == 0, out.stderr
    assert "result: ready" in out.stdout
    assert "loading draft model" in out.stdout
    assert "4/4 shards" in out.stdout


def test_cli_engine_flag_overrides_detection() -> None:
    out = run_cli("replay", str(LOGS / "vllm_28919_qwen3_32b_eagle3_loading.log"), "--engine", "sglang", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["engine"] == "sglang"


def test_cli_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.log"
    out = run_cli("replay", str(missing))
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr.strip().splitlines() == [f"specdash: error: log file not found: {missing}"]
    assert "Traceback" not in out.stderr


def test_cli_directory_is_a_usage_error(tmp_path: Path) -> None:
    out = run_cli("replay", str(tmp_path))
    assert out.returncode == 2
    assert "not a file" in out.stderr


def test_cli_binary_garbage_does_not_crash(tmp_path: Path) -> None:
    junk = tmp_path / "junk.log"
    junk.write_bytes(bytes(range(256)) * 20)
    out = run_cli("replay", str(junk), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["outcome"] == "incomplete"
