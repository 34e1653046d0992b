"""The headless CLI end to end over a real sshd: up --wait, status, logs, bench A/B with crossover, down."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.integration.conftest import target
from tests.support.ports import free_port
from tests.support.remote_sim import sim_config, with_host
from tests.support.sshd import Keys, Sshd


@pytest.fixture
def cli(tmp_path: Path, sshd: Sshd, ssh_keys: Keys, known_hosts: Path):
    port = free_port()
    # `diverge`: EAGLE-3 with a lossy verify step (its greedy text differs from the target's at token 5).
    diverge = '[modes.diverge]\nextends = "eagle3"\nargs = ["--sim-fault", "spec-diverge=5"]\n'
    cfg = sim_config(tmp_path, port=port, extra_modes=diverge)
    # The host entry points at the test sshd with a state dir of its own.
    state_dir = f"~/.specdash-tests/{uuid.uuid4().hex}"
    env = with_host(cfg, "sim", target(sshd), ssh_keys.client_key, known_hosts, state_dir)

    def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "specdash", *args], capture_output=True, text=True, env=env, timeout=timeout
        )

    yield run
    run("down", "sim", "--grace", "5")


def test_up_status_logs_down(cli) -> None:
    up = cli("up", "sim", "--mode", "baseline", "--wait")
    assert up.returncode == 0, up.stderr
    assert "baseline is ready on sim" in up.stdout
    assert "loading weights" in up.stdout and "capturing CUDA graphs" in up.stdout

    again = cli("up", "sim", "--mode", "eagle3")
    assert again.returncode == 1
    assert "already running" in again.stderr and "Traceback" not in again.stderr

    status = cli("status", "sim", "--json")
    info = json.loads(status.stdout)
    assert (info["state"], info["mode"], info["alive"]) == ("ready", "baseline", True)

    # A switch to the live mode throws nothing away: the same server, said so; --restart restarts it.
    same = cli("switch", "sim", "baseline")
    assert same.returncode == 0, same.stderr
    assert f"baseline is already live on sim (pid {info['pid']}, ready)" in same.stdout
    assert json.loads(cli("status", "sim", "--json").stdout)["pid"] == info["pid"]
    restarted = cli("switch", "sim", "baseline", "--restart", "--wait")
    assert restarted.returncode == 0, restarted.stderr
    info = json.loads(cli("status", "sim", "--json").stdout)
    assert (info["state"], info["mode"]) == ("ready", "baseline") and info["pid"] != json.loads(status.stdout)["pid"]

    logs = cli("logs", "sim", "-n", "5")
    assert logs.returncode == 0 and len(logs.stdout.splitlines()) == 5

    down = cli("down", "sim", "--grace", "5")
    assert down.returncode == 0, down.stderr
    assert "stopped run" in down.stdout
    assert json.loads(cli("status", "sim", "--json").stdout)["state"] in ("exited", "stopped")

    # Nothing left to stop is what a cleanup script wants: say so, exit 0.
    nothing = cli("down", "sim", "--grace", "5")
    assert nothing.returncode == 0, nothing.stderr
    assert "Nothing to stop" in nothing.stdout


def test_crash_exits_1_with_the_exception_line(cli) -> None:
    # The crash fault needs load; `bench` provides it (C=12 exceeds batch 10) and the level fails.
    up = cli("up", "sim", "--mode", "crash", "--wait")
    assert up.returncode == 0, up.stderr
    bench = cli("bench", "sim", "--mode", "crash", "--levels", "12", "--output-len", "64", "--requests-per-level", "24")
    assert bench.returncode == 1
    assert "RuntimeError: The size of tensor a (160) must match the size of tensor b (2)" in bench.stdout + bench.stderr


def test_bench_ab_over_ssh_finds_the_crossover(cli) -> None:
    out = cli(
        "bench", "sim", "--modes", "baseline,eagle3", "--levels", "1,8", "--output-len", "64",
        "--requests-per-level", "16", "--json", timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, (out.stdout[-3000:], out.stderr[-3000:])
    result = json.loads(out.stdout)
    base = {lv["concurrency"]: lv["stats"]["output_tok_s"] for lv in result["baseline"]["levels"]}
    spec = {lv["concurrency"]: lv["stats"]["output_tok_s"] for lv in result["eagle3"]["levels"]}
    assert spec[1] > base[1]  # speculation wins alone ...
    assert spec[8] < base[8]  # ... and loses under load
    assert result["crossover"]["kind"] == "crosses"
    assert 1 < result["crossover"]["concurrency"] < 8
    # The default: the probe ran on the host (it has Python >= 3.11), and --json says so.
    for mode in ("baseline", "eagle3"):
        assert result[mode]["probe"]["where"] == "host", result[mode]["probe"]
        assert result[mode]["probe"]["python"].startswith("3.")


def test_bench_probe_local_runs_the_probe_here_and_says_why(cli) -> None:
    out = cli(
        "bench", "sim", "--mode", "baseline", "--levels", "2", "--output-len", "16",
        "--requests-per-level", "6", "--probe", "local", "--json", timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, (out.stdout[-3000:], out.stderr[-3000:])
    probe = json.loads(out.stdout)["baseline"]["probe"]
    assert probe["where"] == "local" and "--probe" in probe["why"]
    usage = cli("bench", "--url", "http://127.0.0.1:9", "--probe", "host")
    assert usage.returncode == 2 and "--probe needs HOST" in usage.stderr and "Traceback" not in usage.stderr


def test_bench_check_greedy_over_ssh_reports_the_lossy_mode_and_stores_both_outputs(cli, tmp_path: Path) -> None:
    db = tmp_path / "greedy.db"
    out = cli(
        "bench", "sim", "--modes", "baseline,diverge", "--levels", "1", "--output-len", "16",
        "--requests-per-level", "4", "--check-greedy", "3", "--db", str(db), "--json", timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, (out.stdout[-3000:], out.stderr[-3000:])
    greedy = json.loads(out.stdout)["greedy"]
    assert (greedy["reference"], greedy["other"], greedy["total"], greedy["identical"]) == ("baseline", "diverge", 3, 0)
    first = greedy["first"]
    assert first["prompt_index"] == 0 and first["reference"] != first["other"]
    # Both modes' outputs are in the store, for the dashboard's check to compare against later.
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT mode, outputs FROM greedy_outputs ORDER BY id").fetchall()
    assert sorted(mode for mode, _ in rows) == ["baseline", "diverge"]
    assert all(len(json.loads(texts)) == 3 for _, texts in rows)

    text = cli(
        "bench", "sim", "--modes", "baseline,diverge", "--levels", "1", "--output-len", "16",
        "--requests-per-level", "4", "--check-greedy", "2", "--db", str(db), timeout=300,
    )  # fmt: skip
    assert text.returncode == 0, (text.stdout[-3000:], text.stderr[-3000:])
    assert "greedy check diverge vs baseline: 0/2 outputs identical; first difference: prompt 0" in text.stdout
