"""specdash itself is killed with SIGKILL in the middle of `specdash bench HOST` (the real CLI, a subprocess)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx

from specdash.bench.agent.bundle import build
from specdash.config import HostConfig
from specdash.remote.ssh import SSHHost, SSHOptions
from specdash.server.lifecycle import Lifecycle, RunRecord
from tests.integration.conftest import target
from tests.integration.remote_sim import sim_config
from tests.reliability.conftest import state_dir as unique_state_dir
from tests.reliability.conftest import timing
from tests.sshd import TEST_HOME, Keys, Sshd, _children, free_port
from tests.support.eventually import eventually_sync

LEVEL = 4
LINK_WAIT = 3
"""The probe agent on the host ends by itself once its client has been gone this long (plus a grace)."""


def _rows(db: Path) -> tuple[int, int]:
    """(completed, failed) samples in the store; (0, 0) before it exists."""
    if not db.exists():
        return 0, 0
    con = sqlite3.connect(db, timeout=5)
    try:
        ok, bad = con.execute(
            "SELECT COALESCE(SUM(error IS NULL), 0), COALESCE(SUM(error IS NOT NULL), 0) FROM samples"
        ).fetchone()
    except sqlite3.OperationalError:  # the schema is not there yet
        return 0, 0
    finally:
        con.close()
    return int(ok), int(bad)


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for kid in _children(todo.pop()):
            found.append(kid)
            todo.append(kid)
    return found


def _agents() -> list[int]:
    """Probe agents of this client version running on the "host" (this machine)."""
    name = build().name.encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if name in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _host_records(port: int) -> int:
    """Successful request records in the files of the agent run against `port` on the "host" (its job file
    names the server's URL; the killed specdash never removed it). Other tests share this home: the newest
    run directory may be theirs."""
    (run,) = [
        d
        for d in (TEST_HOME / ".specdash" / "agent" / "runs").iterdir()
        if (d / "job.json").is_file() and json.loads((d / "job.json").read_text())["url"].endswith(f":{port}")
    ]
    count = 0
    for f in run.glob("*.jsonl"):
        for line in f.read_text().splitlines():
            rec = json.loads(line)
            if rec["t"] == "s" and rec["d"][3] is None:  # field 3: error
                count += 1
    return count


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


async def _requests_finished_on_server(host: SSHHost, port: int) -> int:
    local = await host.forward(port)
    async with httpx.AsyncClient(trust_env=False, timeout=10) as client:
        text = (await client.get(f"http://127.0.0.1:{local}/metrics")).text
    match = re.search(r"^sglang:num_requests_total(?:\{[^}]*\})? ([0-9.e+]+)$", text, re.M)
    assert match, text[:500]
    return int(float(match.group(1)))


def test_sigkill_mid_sweep_loses_no_completed_request_and_the_next_run_attaches(
    tmp_path: Path, sshd: Sshd, ssh_keys: Keys, known_hosts: Path, ssh_options: SSHOptions
) -> None:
    """Nothing lost: every request the server finished before the kill is a completed row in the local
    SQLite store, except at most the C requests that were in flight when specdash died (the server may
    finish those with nobody left to record them); the store is intact (integrity check); no probe worker
    process outlives specdash; and the next `specdash bench` attaches to the still-running server (same
    pid, one run record) instead of launching a second one."""
    port = free_port()
    metered = '[modes.metered]\nextends = "baseline"\nargs = ["--enable-metrics"]\n'
    cfg = sim_config(tmp_path, port=port, time_scale=0.01, extra_modes=metered)
    assert cfg.path is not None
    state_dir = unique_state_dir(tmp_path)
    cfg.path.write_text(
        cfg.path.read_text()
        + f"""
[hosts.sim]
address = "{target(sshd)}"
identity_file = "{ssh_keys.client_key}"
known_hosts = "{known_hosts}"
state_dir = "{state_dir}"
"""
    )
    env = {**os.environ, "SPECDASH_CONFIG": str(cfg.path)}
    db = tmp_path / "bench.db"
    bench = [sys.executable, "-m", "specdash", "bench", "sim", "--mode", "metered", "--output-len", "64",
             "--warmup", "0", "--link-wait", str(LINK_WAIT), "--db", str(db)]  # fmt: skip
    hc = HostConfig(name="sim", address=target(sshd), state_dir=state_dir)
    out = (tmp_path / "bench.out").open("w")
    proc = subprocess.Popen(
        [*bench, "--levels", str(LEVEL), "--requests-per-level", "100000"],
        stdout=out,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    try:

        def going() -> tuple[int, list[int]]:
            """Another process: its store's rows so far and the probe agents on the host."""
            assert proc.poll() is None, (tmp_path / "bench.out").read_text()[-3000:]
            return _rows(db)[0], _agents()

        eventually_sync(
            going, until=lambda seen: seen[0] >= 30 and seen[1], timeout=90,
            what="the sweep going, with its probe on the host (rows stored, agents)",
        )  # fmt: skip
        helpers = _descendants(proc.pid)
        proc.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        proc.wait(10)
        out.close()
        stored_ok, stored_failed = _rows(db)
        con = sqlite3.connect(db)
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        con.close()
        # Probe workers notice the dead parent (their pipe closes) and exit.
        eventually_sync(
            lambda: [p for p in helpers if _alive(p)], until=lambda left: not left, timeout=15,
            what=f"probe processes {helpers} gone after specdash (alive)",
        )  # fmt: skip
        # The probe agent on the host (the default over SSH) runs detached: it cannot tell a dead client from a
        # cut link, and ends by itself once the client's pings have stopped for longer than `link_wait`.
        from specdash.bench.agent.main import PING_GRACE_S

        eventually_sync(
            _agents, until=lambda left: not left, timeout=LINK_WAIT + PING_GRACE_S + 15,
            what="probe agents gone after specdash",
        )  # fmt: skip
        orphans_gone_s = time.monotonic() - killed_at

        async def on_the_host() -> tuple[int, RunRecord]:
            async with SSHHost(target(sshd), ssh_options) as host:
                record = await Lifecycle(host, hc).current()
                assert record is not None and record.alive  # the server outlived specdash
                return await _requests_finished_on_server(host, port), record

        async def after_second_run() -> tuple[RunRecord | None, list[str]]:
            async with SSHHost(target(sshd), ssh_options) as host:
                runs = await host.run(f"ls {state_dir}/runs")
                return await Lifecycle(host, hc).current(), runs.stdout.split()

        finished, record = asyncio.run(on_the_host())
        # With the probe on the host, every finished request is in the agent's record file there (written
        # before it was sent); the local store has what reached it before the kill, nothing else.
        on_host = _host_records(port)
        assert stored_ok <= on_host, (stored_ok, on_host)
        assert finished - LEVEL <= on_host <= finished, (finished, on_host)
        again = subprocess.run(
            [*bench, "--levels", "1", "--requests-per-level", "3"], capture_output=True, text=True, env=env, timeout=120
        )
        assert again.returncode == 0, again.stderr[-3000:]
        after, runs = asyncio.run(after_second_run())
        assert after is not None and (after.id, after.pid) == (record.id, record.pid)
        assert runs == [record.id]  # attached: nothing was launched a second time
    finally:
        if proc.poll() is None:
            proc.kill()
        subprocess.run([*bench[:3], "down", "sim", "--grace", "5"], env=env, capture_output=True, timeout=60)
    timing(
        f"SIGKILL mid-sweep: store has {stored_ok} completed + {stored_failed} failed rows, server finished "
        f"{finished}; {len(helpers)} helper process(es) gone {orphans_gone_s:.2f} s after the kill"
    )
