"""The headless CLI against the real vLLM CPU engine over a real sshd: what a user runs, end to end.

- `bench HOST --modes plain,ngram --check-greedy N --db STORE` (a stored A/B sweep with the greedy check), then
  `runs`, `compare` and `report RUN -o x.html` on that store (issue 16);
- `tune HOST --mode ngram --space 'k=1,2,4' --levels 1,4,16 --repeats 2` with a restart per setting and pass,
  the drop rule's saving, the exported mode and its live verification (issue 18).

Bounded: short outputs, few requests per level. The figures go to `.engine/results/cli.json`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
import warnings
from collections.abc import Callable, Iterator
from html import escape as html_escape
from pathlib import Path
from typing import Any

import pytest

from tests.engine.conftest import ENGINE_PYTHON, RESULTS_DIR
from tests.engine.test_vllm_engine import modes_toml
from tests.integration.conftest import target
from tests.support.ports import free_port
from tests.support.sshd import Keys, Sshd

pytestmark = pytest.mark.engine

HOST = "workstation"
OUTPUT_LEN = 32
GREEDY_N = 6
TUNE_REPEATS = 2
"""Two passes: a setting the drop rule drops after the first is not restarted for the second (issue 18)."""
Cli = Callable[..., subprocess.CompletedProcess[str]]


def engine_cli_config(tmp: Path, sshd: Sshd, ssh_keys: Keys, port: int) -> Path:
    """The engine tests' `plain` and `ngram` modes (test_vllm_engine.engine_config) behind a [hosts] entry."""
    known = tmp / "known_hosts"
    known.write_text(sshd.known_hosts_line() + "\n")
    text = f"""
[hosts.{HOST}]
address = "{target(sshd)}"
identity_file = "{ssh_keys.client_key}"
known_hosts = "{known}"
python = "{ENGINE_PYTHON}"
state_dir = "~/.specdash-tests/{uuid.uuid4().hex}"
{modes_toml(port)}"""
    path = tmp / "config.toml"
    path.write_text(text)
    return path


@pytest.fixture
def cli(engine_ready: Path, tmp_path: Path, sshd: Sshd, ssh_keys: Keys) -> Iterator[Cli]:
    config = engine_cli_config(tmp_path, sshd, ssh_keys, free_port())
    env = {**os.environ, "SPECDASH_CONFIG": str(config), "XDG_DATA_HOME": str(tmp_path / "data")}

    def run(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "specdash", *args], capture_output=True, text=True, env=env, timeout=timeout
        )

    yield run
    run("down", HOST, "--grace", "15")


def save(name: str, value: Any) -> None:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / "cli.json"
    data = json.loads(path.read_text()) if path.is_file() else {}
    data[name] = value
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")


def test_ab_sweep_greedy_runs_compare_report(cli: Cli, tmp_path: Path) -> None:
    store = tmp_path / "store.db"
    bench = cli(
        "bench", HOST, "--modes", "plain,ngram", "--levels", "1,4", "--output-len", str(OUTPUT_LEN),
        "--requests-per-level", "8", "--endpoint", "completions", "--prompts", "code",
        "--check-greedy", str(GREEDY_N), "--db", str(store), "--json",
    )  # fmt: skip
    assert bench.returncode == 0, bench.stderr[-4000:]
    result = json.loads(bench.stdout)
    run_ids = [result["plain"]["run_id"], result["ngram"]["run_id"]]
    for mode in ("plain", "ngram"):
        levels = result[mode]["levels"]
        assert [lv["concurrency"] for lv in levels] == [1, 4]
        assert all(lv["status"] == "done" for lv in levels), levels
    greedy = result["greedy"]
    save("greedy", greedy)
    save("bench", {m: [{"c": lv["concurrency"], "tok_s": lv["stats"]["output_tok_s"]} for lv in result[m]["levels"]]
                   for m in ("plain", "ngram")} | {"verdict": result["verdict"]})  # fmt: skip
    assert greedy["total"] == GREEDY_N
    assert 0 <= greedy["identical"] <= GREEDY_N
    assert (greedy["first"] is None) is (greedy["identical"] == GREEDY_N), greedy
    print(f"\ngreedy: {greedy['identical']}/{greedy['total']} identical; first difference: {greedy['first']}")

    runs = cli("runs", "--db", str(store), "--json")
    assert runs.returncode == 0, runs.stderr
    listed = json.loads(runs.stdout)
    listed = listed["runs"] if isinstance(listed, dict) else listed
    by_id = {r["id"]: r for r in listed}
    assert set(run_ids) <= set(by_id), listed
    assert by_id[run_ids[0]]["host"] == HOST or HOST in json.dumps(by_id[run_ids[0]]), by_id[run_ids[0]]

    compare = cli("compare", *map(str, run_ids), "--db", str(store))
    assert compare.returncode == 0, compare.stderr
    assert "ngram" in compare.stdout and "plain" in compare.stdout
    save("compare", compare.stdout)

    out = tmp_path / "x.html"
    report = cli("report", *map(str, run_ids), "-o", str(out), "--db", str(store))
    assert report.returncode == 0, report.stderr
    html = out.read_text()
    verdict = result["verdict"].removeprefix("verdict: ")
    assert f"<p class='verdict' id='verdict'>{html_escape(verdict, quote=True)}</p>" in html, verdict
    assert "vllm 0.32.0" in html  # the provenance names the engine and its version
    assert "specdash" in html
    # Self-contained: nothing fetched (the SVG namespace URIs are names, not requests).
    assert not re.search(r"""(src|href)\s*=\s*["']?https?:""", html), "the report loads something"
    (RESULTS_DIR / "report.html").write_text(html)
    # Speculative decoding is meant to be lossless at temperature 0. On this engine it is not always, bit for
    # bit: measured 5/6 identical (2026-12-02; the n-gram mode verifies several tokens per forward, whose bf16
    # CPU kernels round differently from one-token decode, and a random-weight model has near-ties). A finding
    # to show (in the warning summary and .engine/results/cli.json), not to hide, and not a failure of specdash.
    if greedy["identical"] != GREEDY_N:
        warnings.warn(f"greedy check: ngram differs from plain at temperature 0: {greedy}", stacklevel=1)


def test_tune_ngram_k_with_restarts_then_verify(cli: Cli, tmp_path: Path) -> None:
    tune = cli(
        "tune", HOST, "--mode", "ngram", "--baseline", "plain", "--space", "k=1,2,4", "--levels", "1,4,16",
        "--repeats", str(TUNE_REPEATS), "--requests-per-level", "16", "--output-len", str(OUTPUT_LEN),
        "--prompts", "code",
        "--write-mode", "ngram-tuned", "--journal-dir", str(tmp_path / "tunes"), "--db", str(tmp_path / "t.db"),
        "--json",
        timeout=1800,
    )  # fmt: skip
    (RESULTS_DIR / "tune.stderr.log").write_text(tune.stderr)
    assert tune.returncode == 0, tune.stderr[-4000:]
    result = json.loads(tune.stdout)
    save("tune", result)
    print("\n" + json.dumps(result, indent=1, default=str)[:6000])
    # Every setting that was not dropped measured every level in every pass; one restart per (setting, pass).
    measured = result["measured"]
    assert set(measured) == {"baseline", "k1", "k2", "k4"}, measured  # pass 1 measures every setting
    for label, per_level in measured.items():
        assert {int(c) for c in per_level} == {1, 4, 16}, (label, per_level)
        if label not in result["dropped"]:  # kept: measured in every pass
            assert {p["n"] for p in per_level.values()} == {TUNE_REPEATS}, (label, per_level)
    assert "baseline" not in result["dropped"]  # the reference is always repeated
    assert result["full_grid_restarts"] == 4 * TUNE_REPEATS
    assert result["restarts"] + result["restarts_saved"] == result["full_grid_restarts"]
    # The drop rule's saving is exactly the passes the dropped settings skipped: with two passes, one restart
    # for each setting dropped after the first (how many are dropped depends on the machine, not asserted).
    skipped = sum(TUNE_REPEATS - max(p["n"] for p in measured[label].values()) for label in result["dropped"])
    assert result["restarts_saved"] == skipped, (result["restarts_saved"], result["dropped"], measured)
    if skipped:
        assert result["restarts"] < result["full_grid_restarts"]
    print(f"\nrestarts {result['restarts']} of the full grid's {result['full_grid_restarts']} "
          f"(saved {result['restarts_saved']}; dropped {result['dropped']})")  # fmt: skip
    # The export is in vLLM's own words, and the exported mode was launched and swept (the verification).
    assert result["exports"], result
    assert all("--speculative-config" in e["command"] for e in result["exports"]), result["exports"]
    assert "verify" in result, result
