"""The command line behind a `--url` (`specdash.bench.listener`) against real listening processes: a real
simulator, a real `ssh -L` forward to it, and `specdash bench --url` storing what it found.

The PID found is checked against `ss -ltnp` (iproute2), which reads the kernel's sockets its own way (netlink).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from specdash.bench.listener import listening_inodes, server_command
from specdash.bench.store import Store
from tests.support.eventually import eventually
from tests.support.ports import free_port
from tests.support.sim_harness import Simulators
from tests.support.sshd import TEST_USER, Keys, Sshd

SECRET = "sk-listener-test-0123456789"


def ss_listener_pid(port: int) -> int:
    out = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True, check=True).stdout
    pids = {int(p) for p in re.findall(r"pid=(\d+)", out)}
    assert len(pids) >= 1, out
    return min(pids)


async def test_the_simulators_command_line_is_found_and_redacted(sim: Simulators) -> None:
    proc = await sim("--model-path", "/models/m", "--api-key", SECRET, "--tp", "2", ready=60)
    for url in (f"http://127.0.0.1:{proc.port}", f"http://localhost:{proc.port}/"):
        got = server_command(url)
        assert got.argv is not None, got
        # The simulator's own argv: `python -m specdash sim --port P ...`, the key's value redacted.
        assert list(got.argv[:4]) == [sys.executable, "-m", "specdash", "sim"], got.argv
        assert ["--port", str(proc.port)] == list(got.argv[4:6])
        assert "--api-key" in got.argv and "<redacted>" in got.argv and SECRET not in repr(got)
        assert got.source == f"/proc/{proc.pid}/cmdline: the process listening on 127.0.0.1:{proc.port}"
        assert ss_listener_pid(proc.port) == proc.pid  # TP children do not hold the socket, or lose to the parent


async def test_an_ssh_forward_is_not_taken_for_the_server(sim: Simulators, sshd: Sshd, ssh_keys: Keys,
                                                          tmp_path: Path) -> None:  # fmt: skip
    proc = await sim("--model-path", "/models/m", ready=60)
    known = tmp_path / "known_hosts"
    known.write_text(sshd.known_hosts_line() + "\n")
    local = free_port()
    forward = await asyncio.create_subprocess_exec(
        "ssh", "-N", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "ExitOnForwardFailure=yes",
        "-o", f"UserKnownHostsFile={known}", "-o", "StrictHostKeyChecking=yes", "-i", str(ssh_keys.client_key),
        "-p", str(sshd.port), "-L", f"{local}:127.0.0.1:{proc.port}", f"{TEST_USER}@{sshd.listen}",
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        await eventually(
            lambda: forward.returncode is not None or bool(listening_inodes(local)), timeout=30,
            what=f"ssh -L listening on {local}",
        )  # fmt: skip
        assert forward.returncode is None, "ssh -L exited"
        got = server_command(f"http://127.0.0.1:{local}")
        assert got.argv is None
        relayed = f"port {local} is relayed by ssh (pid {forward.pid}) to a server elsewhere"
        assert got.source == f"unknown (not started by specdash: {relayed})"
        assert ss_listener_pid(local) == forward.pid
    finally:
        os.killpg(forward.pid, signal.SIGTERM)
        await asyncio.wait_for(forward.wait(), 10)
    # Nothing listens there now.
    gone = server_command(f"http://127.0.0.1:{local}")
    assert gone.argv is None and "no process in this network namespace listens on port" in gone.source


async def test_bench_url_stores_the_command_line_and_the_report_shows_it(sim: Simulators, tmp_path: Path) -> None:
    proc = await sim("--model-path", "/models/m", "--api-key", SECRET, ready=60)
    db = tmp_path / "runs.db"
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "no_proxy": "127.0.0.1,localhost"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "specdash", *args], capture_output=True, text=True, env=env,
                              timeout=300)  # fmt: skip

    local = cli("bench", "--url", f"http://127.0.0.1:{proc.port}", "--mode", "m", "--levels", "1",
                "--requests-per-level", "2", "--output-len", "8", "--db", str(db), "--json")  # fmt: skip
    assert local.returncode == 0, local.stderr[-3000:]
    run_id = json.loads(local.stdout)["run_id"]
    with Store(db) as store:
        record = store.run(run_id)
    assert record is not None
    prov = record.meta.provenance or {}
    assert prov["command"][:4] == [sys.executable, "-m", "specdash", "sim"], prov
    assert "<redacted>" in prov["command"] and SECRET not in json.dumps(prov)
    assert prov["command_source"] == f"/proc/{proc.pid}/cmdline: the process listening on 127.0.0.1:{proc.port}"
    out = tmp_path / "r.html"
    report = cli("report", str(run_id), "-o", str(out), "--db", str(db))
    assert report.returncode == 0, report.stderr
    html = out.read_text()
    assert f"specdash sim --port {proc.port}" in html and f"/proc/{proc.pid}/cmdline" in html
    assert SECRET not in html
