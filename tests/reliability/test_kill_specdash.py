"""specdash itself is killed with SIGKILL in the middle of `specdash bench HOST` (the real CLI, a subprocess):
nothing lost, nothing left behind (the probe agent on the host ends by itself after `link_wait`, or sooner when
the next sweep or `down` finds it orphaned)."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx

from specdash.bench.agent.main import PING_GRACE_S
from specdash.config import HostConfig
from specdash.remote.ssh import SSHHost, SSHOptions
from specdash.server.lifecycle import Lifecycle, RunRecord
from specdash.server.probe_agent import ORPHAN_IDLE_S
from tests.integration.conftest import target
from tests.reliability.conftest import state_dir as unique_state_dir
from tests.reliability.conftest import timing
from tests.support.eventually import eventually_sync
from tests.support.ports import free_port
from tests.support.remote_sim import sim_config, with_host
from tests.support.sshd import TEST_HOME, Keys, Sshd, _children

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


def _agents_of(port: int) -> dict[int, Path]:
    """The probe agents running for sweeps against the server on `port`: PID -> their run directory. Found by
    the pidfiles of detached commands (`~/.specdash/procs/<client>/d.<pid>`), the client's tag in their
    environment and the run directory on their command line (whose `url` names the server), never by a
    process name: other tests' agents run on this "host" too."""
    runs_dir = TEST_HOME / ".specdash" / "agent" / "runs"
    runs = {
        d.relative_to(TEST_HOME).as_posix(): d
        for d in (runs_dir.iterdir() if runs_dir.is_dir() else [])
        if (d / "url").is_file() and (d / "url").read_text().endswith(f":{port}")
    }
    found = {}
    for pidfile in (TEST_HOME / ".specdash" / "procs").glob("*/d.*"):
        pid = pidfile.name.removeprefix("d.")
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        except (OSError, ValueError):
            continue
        if f"SPECDASH_TAG={pidfile.parent.name}.d".encode() in environ and _alive(int(pid)) and "--job" in argv:
            run = argv[argv.index("--job") + 1].rpartition("/")[0]
            if run in runs:
                found[int(pid)] = runs[run]
    return found


def _alive_file(pid: int) -> Path:
    """The file an agent's client touches with each ping (`--alive`, relative to the test user's home)."""
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    return TEST_HOME / argv[argv.index("--alive") + 1]


def _last_record(run: Path) -> dict[str, object]:
    """The last record an agent of `run` wrote (its newest record file)."""
    newest = max(run.glob("*.jsonl"), key=lambda p: int(p.stem))
    record: dict[str, object] = json.loads(newest.read_text().splitlines()[-1])
    return record


def _host_records(port: int) -> int:
    """Successful request records in the files of the agent run against `port` on the "host" (its job file
    names the server's URL; the killed specdash never removed it). Other tests share this home: the newest
    run directory may be theirs."""
    # The newest of them: a killed specdash of an earlier suite run on this machine may have left one for the
    # same port (the workers' port blocks are the same in every run).
    run = max(
        (
            d
            for d in (TEST_HOME / ".specdash" / "agent" / "runs").iterdir()
            if (d / "job.json").is_file() and json.loads((d / "job.json").read_text())["url"].endswith(f":{port}")
        ),
        key=lambda d: d.stat().st_mtime,
    )
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


def _sim_host(
    tmp_path: Path, sshd: Sshd, ssh_keys: Keys, known_hosts: Path, port: int, extra_modes: str = ""
) -> tuple[dict[str, str], str]:
    """A config with the simulator's modes and the host `sim` (the test sshd): the CLI's environment naming it,
    and the host's state directory (unique: other tests share the test user's home)."""
    cfg = sim_config(tmp_path, port=port, extra_modes=extra_modes)
    state_dir = unique_state_dir(tmp_path)
    return with_host(cfg, "sim", target(sshd), ssh_keys.client_key, known_hosts, state_dir), state_dir


def _start_and_wait(
    bench: list[str], db: Path, out: Path, env: dict[str, str], port: int, rows: int
) -> tuple[subprocess.Popen[bytes], dict[int, Path]]:
    """An endless level of `bench` in its own session, once it has stored `rows` completed requests and its
    probe agent runs on the host: the process and the agents (PID -> run directory)."""
    log = out.open("w")
    proc = subprocess.Popen([*bench, "--levels", str(LEVEL), "--requests-per-level", "100000", "--db", str(db)],
                            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)  # fmt: skip
    log.close()

    def going() -> tuple[int, dict[int, Path]]:
        """Another process: its store's rows so far and the probe agents on the host."""
        assert proc.poll() is None, out.read_text()[-3000:]
        return _rows(db)[0], _agents_of(port)

    try:
        _, agents = eventually_sync(
            going, until=lambda seen: seen[0] >= rows and seen[1], timeout=90,
            what=f"{out.stem}: the sweep going, with its probe on the host (rows stored, agents)",
        )  # fmt: skip
    except BaseException:
        proc.kill()
        proc.wait(10)
        raise
    return proc, agents


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
    env, state_dir = _sim_host(tmp_path, sshd, ssh_keys, known_hosts, port, metered)
    db = tmp_path / "bench.db"
    bench = [sys.executable, "-m", "specdash", "bench", "sim", "--mode", "metered", "--output-len", "64",
             "--warmup", "0", "--link-wait", str(LINK_WAIT)]  # fmt: skip
    hc = HostConfig(name="sim", address=target(sshd), state_dir=state_dir)
    proc, _ = _start_and_wait(bench, db, tmp_path / "bench.out", env, port, rows=30)
    try:
        helpers = _descendants(proc.pid)
        proc.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        proc.wait(10)
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
        eventually_sync(
            lambda: _agents_of(port), until=lambda left: not left, timeout=LINK_WAIT + PING_GRACE_S + 15,
            what="probe agents of the killed sweep gone by themselves",
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
            [*bench, "--levels", "1", "--requests-per-level", "3", "--db", str(db)],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip
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


def test_orphaned_agents_of_a_killed_specdash_are_stopped_by_the_next_sweep_and_by_down(
    tmp_path: Path, sshd: Sshd, ssh_keys: Keys, known_hosts: Path
) -> None:
    """With the default `link_wait` (600 s) the agent of a SIGKILLed specdash would load the server for ten
    minutes. The next sweep against that server stops it once its client's pings are stale (it would distort
    the new sweep), and `down` stops every agent that loads the server it stops, before the server; each
    stopped agent ends its level cleanly on the host (`done`, "agent terminated")."""
    port = free_port()
    env, _ = _sim_host(tmp_path, sshd, ssh_keys, known_hosts, port)
    bench = [sys.executable, "-m", "specdash", "bench", "sim", "--mode", "baseline", "--output-len", "64",
             "--warmup", "0", "--link-wait", "600"]  # fmt: skip

    def start_and_kill(name: str) -> tuple[int, Path]:
        """A sweep whose specdash is SIGKILLed once its agent runs a level: (the orphan's PID, its run dir)."""
        proc, agents = _start_and_wait(bench, tmp_path / f"{name}.db", tmp_path / f"{name}.out", env, port, rows=10)
        proc.kill()
        proc.wait(10)
        ((pid, run),) = agents.items()
        return pid, run

    try:
        orphan, run = start_and_kill("first")
        alive_file = _alive_file(orphan)
        eventually_sync(
            lambda: time.time() - alive_file.stat().st_mtime, until=lambda age: age > ORPHAN_IDLE_S + 1,
            timeout=ORPHAN_IDLE_S + 30, what="the orphan's pings stale (seconds since the last)",
        )  # fmt: skip
        assert _alive(orphan)  # on its own it would run until link_wait is over
        again = subprocess.run([*bench, "--levels", "1", "--requests-per-level", "3", "--db", str(tmp_path / "b.db")],
                               capture_output=True, text=True, env=env, timeout=180)  # fmt: skip
        assert again.returncode == 0, again.stderr[-3000:]
        assert not _alive(orphan) and _agents_of(port) == {}
        last = _last_record(run)
        assert last["t"] == "done" and last["o"]["aborted"] == "agent terminated", last  # type: ignore[index]

        orphan, run = start_and_kill("second")
        down = subprocess.run([*bench[:3], "down", "sim", "--grace", "5"], capture_output=True, text=True, env=env,
                              timeout=120)  # fmt: skip
        assert down.returncode == 0, down.stderr[-3000:]
        assert f"stopped 1 probe agent(s) loading it: pid {orphan}" in down.stdout, down.stdout
        assert not _alive(orphan) and _agents_of(port) == {}
        last = _last_record(run)
        assert last["t"] == "done" and last["o"]["aborted"] == "agent terminated", last  # type: ignore[index]
    finally:
        subprocess.run([*bench[:3], "down", "sim", "--grace", "5"], env=env, capture_output=True, timeout=60)
