"""`specdash replay --json` over full logs of the real vLLM CPU engine started, crashed and stopped on purpose
(tests/fixtures/logs/vllm_cpu_real/, made by `tests/engine/make_logs.py`; how each was made is in its label).

The labels (`labels.json`, the format of `labels-batch2.json` plus the outcome) were written by reading each
log, not by running specdash on it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import cli

REAL = Path(__file__).parent.parent / "fixtures" / "logs" / "vllm_cpu_real"
LABELS: dict[str, dict[str, Any]] = {
    k: v for k, v in json.loads((REAL / "labels.json").read_text()).items() if not k.startswith("_")
}
STAGE = {
    "launching": "launching",
    "loading_weights": "loading weights",
    "compiling": "compiling",
    "allocating_kv_cache": "allocating KV cache",
    "warming_up": "warming up",
    "ready": "ready",
}
EXIT = {"ready": 0, "serving": 0, "stopped": 0, "crashed": 1, "incomplete": 3}


def test_every_real_log_has_a_label() -> None:
    assert {p.name for p in REAL.glob("*.log")} == set(LABELS)
    assert len(LABELS) >= 10


@pytest.mark.parametrize("name", sorted(LABELS))
def test_replay_json_matches_the_label(name: str) -> None:
    want = LABELS[name]
    out = cli("replay", str(REAL / name), "--json")
    assert out.stderr == "" or "Traceback" not in out.stderr, out.stderr
    data = json.loads(out.stdout)
    assert data["engine"] == want["engine"]
    assert data["outcome"] == want["outcome"], data
    assert (data["outcome"] == "crashed") is want["crashed"]
    assert out.returncode == EXIT[want["outcome"]]
    assert data["highest_phase"] == STAGE[want["furthest"]], data
    if "reason" in want:
        # The reason names the crash: the labelled line (or its exception text) decided it.
        named = want["reason"] in (data["reason"] or "") + "\n" + data["decided_by"]["text"]
        if "known_miss" in want and not named:
            pytest.xfail(f"known miss: {want['known_miss']}")
        assert named, data
