"""Every fixture log through the tracker, against the labels in tests/fixtures/logs/expected.toml, and the
`specdash replay` command on top of it."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from specdash.core.lines import split_lines
from specdash.core.startup import StartupTracker
from specdash.core.startup_events import Crashed, MetricsSeen, PhaseChanged, ProgressChanged, Suspect, VersionSeen
from specdash.core.timeline import Outcome, replay_file, replay_text
from specdash.engines.registry import detect_engine
from tests.support.cli import cli
from tests.support.peak_rss import peak_rss

LOGS = Path(__file__).parent.parent / "fixtures" / "logs"
EXPECTED: dict[str, dict[str, Any]] = tomllib.loads((LOGS / "expected.toml").read_text())
BATCH2: dict[str, dict[str, Any]] = {
    k: v for k, v in json.loads((LOGS / "labels-batch2.json").read_text()).items() if not k.startswith("_")
}
"""The second batch's labels, as given with the excerpts (see INDEX.md)."""
STAGE = {
    "loading_weights": "loading weights",
    "capturing_graphs": "capturing CUDA graphs",
    "warming_up": "warming up",
    "ready": "ready",
}
NO_ENGINE_NAMED = {"vllm_9225_v062_bind_address_in_use_2024-10.log"}
"""Excerpts in which no line names or is shaped like one engine's (only uvicorn lines): read as `unknown`."""


def test_every_log_has_a_label() -> None:
    # vllm_cpu_real/ and vllm_h100_real/ have their own labels (test_replay_vllm_cpu_real.py, _h100_real.py).
    on_disk = {
        p.relative_to(LOGS).as_posix()
        for p in LOGS.rglob("*.log")
        if p.parent.name not in ("vllm_cpu_real", "vllm_h100_real")
    }
    assert on_disk == set(EXPECTED) | set(BATCH2)
    assert not set(EXPECTED) & set(BATCH2)
    excerpts = [name for name in on_disk if "/" not in name and not name.startswith("vllm_cpu_")]
    assert len(excerpts) == 34


@pytest.mark.parametrize("name", sorted(BATCH2))
def test_second_batch_matches_its_label(name: str) -> None:
    """Crashed or not, the furthest stage the text proves, the last shard progress, an intentional stop, and
    the line that names the crash (the deciding line)."""
    want = BATCH2[name]
    with (LOGS / name).open("rb") as stream:
        timeline = replay_file(stream)
    assert timeline.engine == ("unknown" if name in NO_ENGINE_NAMED else want["engine"])
    summary = timeline.as_dict()
    assert (summary["outcome"] == "crashed") is want["crashed"], summary
    assert summary["highest_phase"] == STAGE.get(want.get("furthest", ""), "launching")
    if want.get("final") == "stopped":
        assert summary["outcome"] == "stopped"
    if "shard" in want:
        shards = [s.progress for s in timeline.spans if s.progress is not None and s.progress.unit == "shards"]
        assert shards and (shards[-1].done, shards[-1].total) == tuple(want["shard"])
    if "reason" in want:
        decided = summary["decided_by"]
        assert isinstance(decided, dict)
        assert decided["text"].strip() == want["reason"].strip()
        lines = (LOGS / name).read_text(encoding="utf-8").splitlines()
        assert lines[decided["line"] - 1].strip() == want["reason"].strip()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_replay_matches_label(name: str) -> None:
    want = EXPECTED[name]
    text = (LOGS / name).read_text(encoding="utf-8")
    assert detect_engine(split_lines(text)) == want["engine"]

    timeline = replay_text(text)
    assert timeline.outcome.value == want["outcome"]
    if "decided" in want:
        assert timeline.decision is not None and timeline.decision.line_no == want["decided"]
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
    return cli(*args)


def test_cli_json_output() -> None:
    out = run_cli("replay", str(LOGS / "sglang_2468_warmup_fail_502_2024-12.log"), "--json")
    assert out.returncode == 1, out.stderr  # crashed
    data = json.loads(out.stdout)
    assert data["decided_by"]["line"] == 14 and data["decided_by"]["text"].startswith("AssertionError")
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
    assert "result: serving" in out.stdout
    assert "loading draft model" in out.stdout
    assert "4/4 shards" in out.stdout


def test_cli_engine_flag_overrides_detection() -> None:
    out = run_cli("replay", str(LOGS / "vllm_28919_qwen3_32b_eagle3_loading.log"), "--engine", "sglang", "--json")
    assert out.returncode == 3, out.stderr  # incomplete
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


@pytest.mark.parametrize(
    "content",
    [bytes(range(256)) * 20, b"myhost\n", b"", b"# a note about vllm-like things\nnothing else\n"],
    ids=["binary", "hostname", "empty", "prose"],
)
def test_cli_not_a_server_log(tmp_path: Path, content: bytes) -> None:
    """A file with no server evidence says so in one line, exit 2, and claims no engine."""
    junk = tmp_path / "junk.log"
    junk.write_bytes(content)
    out = run_cli("replay", str(junk), "--json")
    if content.startswith(b"# a note"):  # names an engine in prose: an engine's log with nothing in it
        assert out.returncode == 3 and json.loads(out.stdout)["outcome"] == "incomplete"
        return
    assert out.returncode == 2, out.stdout
    assert out.stdout == ""
    assert out.stderr.strip().splitlines() == [
        f"specdash: error: {junk}: not a server log (no line in it is one an inference server prints)"
    ]


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("vllm_pr34022_eagle3_draft_startup_complete_2026-02.log", 0),  # ready
        ("sglang_pr22166_serving_comma_format_2026-04.log", 0),  # serving
        ("vllm_pr43707_sigint_shutdown_lines_2026-05.log", 0),  # stopped
        ("vllm_40756_mtp_serving_worker_died_2026-05.log", 1),  # crashed
        ("sglang_pr15426_startup_head_2025-12.log", 3),  # incomplete
    ],
)
def test_cli_exit_code_says_the_outcome(name: str, code: int) -> None:
    out = run_cli("replay", str(LOGS / name), "--json")
    assert out.returncode == code, out.stderr
    outcome = json.loads(out.stdout)["outcome"]
    assert outcome in {0: ("ready", "serving", "stopped"), 1: ("crashed",), 3: ("incomplete",)}[code]


def test_replay_streams_a_large_log_in_bounded_memory(tmp_path: Path) -> None:
    """A 20 MB log (serving lines, then a crash at its very end) is read in a bounded amount of memory, and
    its last lines decide."""
    big = tmp_path / "big.log"
    line = b"[2026-03-22 13:53:37 TP0] Decode batch, #running-req: 6, #token: 42414, token usage: 0.04, " * 2 + b"\n"
    with big.open("wb") as out:
        block = line * 10_000
        while out.tell() < 20 * 1024 * 1024:
            out.write(block)
        out.write(b"[2026-03-22 13:53:38 TP0] Traceback (most recent call last):\n")
        out.write(
            b'  File "/x/scheduler.py", line 1, in run\n    step()\nRuntimeError: CUDA error: illegal memory access\n'
        )
    with peak_rss() as memory, big.open("rb") as stream:
        timeline = replay_file(stream)
    peak = memory.added
    assert timeline.outcome is Outcome.CRASHED
    assert timeline.decision is not None and timeline.decision.line.startswith("RuntimeError: CUDA error")
    assert timeline.lines > 100_000
    assert peak < 16 * 1024 * 1024, peak  # the file is 20 MB; the engine detection holds at most 4 MB
