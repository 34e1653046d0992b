"""Adopting a server specdash did not start: a simulator started by hand with `setsid nohup ... &` over
the real sshd (as a user would), then found through the port pre-check, adopted, watched, benched and
stopped by its process group; recorded as an adoption, never as a startup."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from specdash.bench.probe import ProbeSettings
from specdash.bench.sse import Endpoint
from specdash.bench.store import Store
from specdash.bench.sweep import SweepConfig
from specdash.config import Config, HostConfig
from specdash.core.events import LogBatch
from specdash.phases import SETTLED, Origin, Phase
from specdash.remote.ssh import SSHHost, SSHOptions
from specdash.server.launch import launch_argv
from specdash.server.lifecycle import PortBusy
from specdash.server.remote_session import RemoteSession, running
from tests.integration.conftest import remote_alive, target
from tests.support.ports import free_port
from tests.support.recorder import Recorder
from tests.support.remote_sim import by_hand_command, sim_config
from tests.support.sshd import Keys, Sshd


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def cfg(tmp_path: Path, port: int) -> Config:
    return sim_config(tmp_path, port=port)


@pytest.fixture
def host_cfg(sshd: Sshd) -> HostConfig:
    return HostConfig(name="sim-host", address=target(sshd), state_dir=f"~/.specdash-tests/{uuid.uuid4().hex}")


@pytest.fixture
async def by_hand(
    sshd: Sshd, ssh_options: SSHOptions, host_cfg: HostConfig, cfg: Config
) -> AsyncIterator[tuple[int, str, list[str]]]:
    """The baseline mode's command, started by hand on the host, not by specdash: (pid, log, argv)."""
    argv = launch_argv(cfg.mode("baseline"), host_cfg)
    log = f"hand-started-{uuid.uuid4().hex[:8]}.log"
    async with SSHHost(target(sshd), ssh_options) as h:
        started = await h.run(by_hand_command(cfg.mode("baseline"), host_cfg, log))
        pid = int(started.stdout.split()[-1])
        home = (await h.run("echo $HOME")).stdout.strip()
        try:
            yield pid, f"{home}/{log}", argv
        finally:
            await h.run(f"kill -KILL -- -{pid} 2>/dev/null; rm -f ~/{log}; rm -rf {host_cfg.state_dir}")


async def wait_listening(session: RemoteSession, port: int, timeout: float = 60.0) -> None:
    async with asyncio.timeout(timeout):
        while not (await session.host.run(f"ss -Hltn 'sport = :{port}'")).stdout.strip():
            await session.host.run("sleep 0.2")


async def test_a_server_started_by_hand_is_adopted_watched_benched_and_stopped(
    sshd: Sshd,
    ssh_options: SSHOptions,
    host_cfg: HostConfig,
    cfg: Config,
    port: int,
    tmp_path: Path,
    by_hand: tuple[int, str, list[str]],
) -> None:
    pid, log, argv = by_hand
    store = Store(tmp_path / "store.db")
    seen = Recorder()
    session = RemoteSession(SSHHost(target(sshd), ssh_options), host_cfg, cfg, store=store)
    async with running(session, seen):
        assert session.status.origin is Origin.NONE  # nothing of ours: the hand-started one has no run record
        await wait_listening(session, port)
        # The port pre-check names the process, and says it can be adopted.
        with pytest.raises(PortBusy, match="specdash adopt") as busy:
            await session.start("baseline")
        assert busy.value.pid == pid

        found = await session.find_adoptable(pid=busy.value.pid)
        assert found.ok, found.describe()
        assert (found.engine, found.mode, found.matched) == ("sglang", "baseline", True)
        assert (found.log_path, found.log_source, found.port) == (log, "stdout", port)
        assert found.found.argv == tuple(argv)

        await session.adopt(found)
        ready = await session.wait_status(SETTLED, timeout=60)
        assert ready.phase is Phase.READY, ready
        assert (ready.origin, ready.pid, ready.mode) == (Origin.ADOPTED, pid, "baseline")
        # Followed from the start of the file: the first line the simulator wrote is there.
        first_line = (await session.host.run(f"head -n 1 {log}")).stdout.strip()
        lines = [line.text for batch in seen.of(LogBatch) for line in batch.lines]  # type: ignore[attr-defined]
        assert first_line and lines and lines[0] == first_line

        settings = ProbeSettings(endpoint=Endpoint.GENERATE, output_len=16, stall_timeout_s=20, request_timeout_s=60)
        bench = SweepConfig(requests_per_level=3, warmup_requests=1, processes=0, settings=settings)
        await session.sweep([], [1], config=bench)
        level = session.results["baseline"].levels[0]
        assert level.status == "done" and level.stats.completed == 3
        assert session.status.pid == pid  # measured as it runs: not restarted

        # Recorded as an adoption; nothing for the ETA to learn from.
        kinds = [r.kind for r in store.startups(host="sim-host")]
        assert kinds == ["adoption"]
        assert store.startups(host="sim-host", kind="startup") == []

        await session.stop()
        assert session.status.phase is Phase.STOPPED
        assert not await remote_alive(session.host, pid)
        group = await session.host.run(f"ps -eo pgid=,stat= | awk '$1 == {pid} && $2 !~ /^Z/'")
        assert group.stdout.strip() == ""


async def test_a_server_that_does_not_lead_its_group_is_not_adopted(
    sshd: Sshd, ssh_options: SSHOptions, host_cfg: HostConfig, cfg: Config
) -> None:
    async with running(RemoteSession(SSHHost(target(sshd), ssh_options), host_cfg, cfg)) as session:
        # A `sleep` run from a script without job control shares the script's group: not adoptable, and the
        # reasons say why (not an engine, not its group's leader, no log file).
        started = await session.host.run("sh -c 'sleep 60 > /dev/null 2>&1 & echo $!'")
        pid = int(started.stdout.split()[-1])
        try:
            found = await session.find_adoptable(pid=pid)
            assert not found.ok
            text = " ".join(found.problems)
            assert "neither SGLang" in text and "does not lead its process group" in text and "/dev/null" in text
        finally:
            await session.host.run(f"kill {pid}")


def test_cli_adopt_then_down_asks_naming_pid_and_command(
    sshd: Sshd,
    ssh_options: SSHOptions,
    ssh_keys: Keys,
    known_hosts: Path,
    host_cfg: HostConfig,
    cfg: Config,
    port: int,
    by_hand: tuple[int, str, list[str]],
) -> None:
    pid, log, _ = by_hand
    assert cfg.path is not None
    cfg.path.write_text(
        cfg.path.read_text()
        + f'\n[hosts.sim]\naddress = "{target(sshd)}"\nidentity_file = "{ssh_keys.client_key}"\n'
        + f'known_hosts = "{known_hosts}"\nstate_dir = "{host_cfg.state_dir}"\n'
    )
    env = {**os.environ, "SPECDASH_CONFIG": str(cfg.path)}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "specdash", *args],
            capture_output=True, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    up = cli("up", "sim", "--mode", "baseline")
    deadline = time.monotonic() + 60
    while "already in use" not in up.stderr and time.monotonic() < deadline:  # until the simulator listens
        up = cli("up", "sim", "--mode", "baseline")
    assert up.returncode == 1 and f"adopt it with 'specdash adopt sim --port {port}'" in up.stderr, up.stderr
    assert "stopped" not in up.stdout  # headless output begins with a real state, not a made-up one
    assert up.stdout.startswith("connecting to ")

    adopted = cli("adopt", "sim", "--port", str(port), "--wait")
    assert adopted.returncode == 0, adopted.stderr
    assert f"pid {pid} (process group {pid})" in adopted.stdout and f"log: {log} (from stdout)" in adopted.stdout
    assert "mode baseline" in adopted.stdout and "ready (adopted" in adopted.stdout

    asked = cli("down", "sim")  # no terminal to ask on: refused, naming what it would stop
    assert asked.returncode == 2
    assert f"Stop pid {pid} on sim, which specdash did not start: /usr/bin/" in asked.stderr
    assert "sim --model-path /models/kimi-k2.5" in asked.stderr and "--yes" in asked.stderr

    down = cli("down", "sim", "--yes", "--grace", "5")
    assert down.returncode == 0, down.stderr
    assert "stopped run" in down.stdout
