"""A full disk in the middle of `bench` (issue 29 point 6): one line naming the store, exit 1, and what was
collected before stays in it. The disk fills by a file size limit on the bench process (RLIMIT_FSIZE, with
SIGXFSZ ignored, so a write past it fails with EFBIG as a full disk's does), against the real simulator."""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.support.sim_harness import Simulators

LIMIT_BYTES = 150_000
"""Room for the store's tables and a first level's samples, not for four levels of them."""


def _limit_file_size() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT_BYTES, LIMIT_BYTES))


async def test_a_full_disk_mid_bench_names_the_store_and_keeps_what_was_collected(
    sim: Simulators, tmp_path: Path
) -> None:
    proc = await sim("--model-path", "/models/m", "--sim-speed", "4", ready=60)
    db = tmp_path / "runs.db"
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "d"), "XDG_STATE_HOME": str(tmp_path / "s")}
    env["no_proxy"] = "127.0.0.1,localhost"
    argv = [sys.executable, "-m", "specdash", "bench", "--url", f"http://127.0.0.1:{proc.port}", "--mode", "m",
            "--levels", "1,2,4,8", "--duration", "3", "--output-len", "64", "--db", str(db)]  # fmt: skip
    done = await asyncio.to_thread(
        subprocess.run, argv, preexec_fn=_limit_file_size, capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 1, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("specdash")]
    assert len(errors) == 1 and str(db) in errors[0] and "internal error" not in errors[0], done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    with sqlite3.connect(db) as conn:
        runs = conn.execute("select count(*) from runs").fetchone()[0]
        samples = conn.execute("select count(*) from samples").fetchone()[0]
    assert runs == 1 and samples > 0  # the run and the requests measured before the disk filled are there
