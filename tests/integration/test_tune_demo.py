"""`specdash tune demo` end to end (the real CLI in a subprocess, the embedded SSH host, the simulator).

A crashing setting is a result and the tune goes on; `--verify` of the field's dynamic mode reports the
crash line and the level and marks the policy unsafe; a SIGKILL mid-tune and `--resume` measure nothing
twice, and every level is in the store once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

from specdash.bench.store import Store
from tests.support.eventually import eventually_sync
from tests.support.remote_sim import QUICK_STARTUP

CRASH_LINE = "RuntimeError: The size of tensor a (160) must match the size of tensor b (2)"
DEADLINE_S = 600.0


def argv(tmp_path: Path, *extra: str, name: str = "t") -> list[str]:
    # Each restart's simulated startup in about 3 s (the tour's 0.01 takes 6).
    return [sys.executable, "-m", "specdash", "tune", "demo", "--repeats", "1", "--duration", "1", "--json",
            "--time-scale", str(QUICK_STARTUP),
            "--journal-dir", str(tmp_path / "j"), "--db", str(tmp_path / "db.sqlite"), "--name", name,
            *extra]  # fmt: skip


def tune(tmp_path: Path, *extra: str, name: str = "t") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv(tmp_path, *extra, name=name), capture_output=True, text=True, timeout=DEADLINE_S, env=os.environ.copy()
    )


def journal(tmp_path: Path, name: str = "t") -> list[dict[str, object]]:
    path = tmp_path / "j" / f"{name}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_crashing_setting_is_a_result_and_verify_marks_the_dynamic_mode_unsafe(tmp_path: Path) -> None:
    space = ("--mode", "eagle3-dynamic", "--space", "steps=1,3 topk=1 draft=2", "--levels", "1,12")
    done = tune(tmp_path, *space, "--no-verify")
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["settings"] == ["s1-k1-d2", "s3-k1-d4"] or sorted(out["settings"]) == ["s1-k1-d2", "s3-k1-d4"]
    assert any("runs as s3-k1-d4" in s["reason"] for s in out["skipped"])
    crashes = {c["candidate"]: c for c in out["crashes"]}
    assert set(crashes) == {"s1-k1-d2", "s3-k1-d4"}, "both crash once more than 10 requests run"
    # A string, not a tuple: pytest shortens a message that is not a string to one line (ci20's said nothing).
    assert all(c["c"] == 12 and CRASH_LINE in c["reason"] for c in crashes.values()), f"{crashes}\n{done.stderr}"
    assert "12" in out["measured"]["baseline"] and "1" in out["measured"]["s3-k1-d4"], "the tune went on"
    assert out["policy"]["ranges"][-1]["choice"] == "baseline"

    verified = tune(tmp_path, *space, "--verify", "eagle3-dynamic")
    assert verified.returncode == 1, verified.stderr[-2000:]
    v = json.loads(verified.stdout)["verify"]
    assert v["unsafe"] is True and v["crash"]["level"] == 12 and CRASH_LINE in v["crash"]["line"]
    assert any(r["type"] == "verify" and r["unsafe"] for r in journal(tmp_path))


def test_resume_after_sigkill_measures_nothing_twice(tmp_path: Path) -> None:
    args = ("--mode", "eagle3", "--space", "steps=1,3 topk=1 draft=2", "--levels", "1,2", "--no-verify")
    proc = subprocess.Popen(
        argv(tmp_path, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    path = tmp_path / "j" / "t.jsonl"

    def spec_levels() -> list[dict[str, object]]:
        records = journal(tmp_path) if path.exists() else []
        return [r for r in records if r.get("type") == "level" and r["candidate"] != "baseline"]

    try:
        # Kill once a speculative setting has measured its first level but not its second.
        eventually_sync(
            spec_levels, until=lambda spec: len(spec) == 1 or proc.poll() is not None, timeout=DEADLINE_S,
            what="one speculative level in the journal (its level records)",
        )  # fmt: skip
        assert proc.poll() is None, "the tune ended before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        proc.stderr.close()
    before = [r for r in journal(tmp_path) if r.get("type") == "level"]
    again = tune(tmp_path, *args, "--resume")
    assert again.returncode == 0, again.stderr[-2000:]
    out = json.loads(again.stdout)
    etas = [line for line in again.stderr.splitlines() if line.startswith("tune: pass ") and "(ETA " in line]
    assert etas, f"the live lines show the tune's ETA: {again.stderr[-1000:]}"
    assert not any(" h)" in line for line in etas), "with the journal's startups the ETA is minutes, not hours"
    levels = [(r["candidate"], r["repeat"], r["c"]) for r in journal(tmp_path) if r.get("type") == "level"]
    assert len(levels) == len(set(levels)) == 6, "3 candidates x 2 levels, each measured once"
    assert [(r["candidate"], r["repeat"], r["c"]) for r in before] == levels[: len(before)]
    assert set(out["measured"]) == {"baseline", "s1-k1-d2", "s3-k1-d4"}
    with Store(tmp_path / "db.sqlite") as store:
        done = Counter(
            (run.meta.mode, lv.concurrency)
            for run in store.runs()
            for lv in store.levels(run.id)
            if lv.status == "done"
        )
    assert done and max(done.values()) == 1, f"a level was measured twice: {done}"
    assert sum(done.values()) == 6
