"""Server lifecycle over a real sshd, with the simulator as the remote server (run as the test user).

Every test ends with nothing of ours left running on the "remote" side: the `cleanup` fixture stops any
live run by its process group.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from specdash.config import Config, HostConfig
from specdash.core.lines import split_lines
from specdash.phases import SETTLED, STARTUP_ORDER, Phase
from specdash.remote.events import Connected, Lost
from specdash.remote.ssh import SSHHost, SSHOptions
from specdash.server.lifecycle import Lifecycle, PortBusy, ServerAlreadyRunning
from specdash.server.remote_session import RemoteSession, running
from tests.integration.conftest import remote_alive, target
from tests.support.cpuhog import IDLE_AND_HOGGED, cpu_hog
from tests.support.ports import free_port
from tests.support.recorder import Recorder
from tests.support.remote_sim import overload, sim_config
from tests.support.sshd import Sshd


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def cfg(tmp_path: Path, port: int) -> Config:
    return sim_config(tmp_path, port=port)


@pytest.fixture
def host_cfg(sshd: Sshd, tmp_path: Path) -> HostConfig:
    # Each test keeps its run records apart, so tests (and benchmarks) never see each other's runs.
    return HostConfig(name="sim-host", address=target(sshd), state_dir=f"~/.specdash-tests/{uuid.uuid4().hex}")


@pytest.fixture
async def cleanup(sshd: Sshd, ssh_options: SSHOptions, host_cfg: HostConfig) -> AsyncIterator[None]:
    yield
    async with SSHHost(target(sshd), ssh_options) as h:
        lifecycle = Lifecycle(h, host_cfg)
        record = await lifecycle.current()
        if record is not None and record.alive:
            await lifecycle.stop(record, grace=5)
        await h.run(f"rm -rf {host_cfg.state_dir}")


async def group_members(host: SSHHost, pgid: int) -> list[str]:
    """Live (non-zombie) processes of a process group on the host."""
    ps = await host.run(f"ps -eo pid=,pgid=,stat=,args= | awk '$2 == {pgid} && $3 !~ /^Z/'")
    return ps.stdout.splitlines()


def make_session(sshd: Sshd, ssh_options: SSHOptions, host_cfg: HostConfig, cfg: Config) -> RemoteSession:
    return RemoteSession(SSHHost(target(sshd), ssh_options), host_cfg, cfg)


@pytest.mark.usefixtures("cleanup")
async def test_up_reaches_ready_through_every_phase_then_down_frees_everything(
    sshd: Sshd, ssh_options: SSHOptions, host_cfg: HostConfig, cfg: Config, port: int
) -> None:
    seen = Recorder()
    async with running(make_session(sshd, ssh_options, host_cfg, cfg), seen) as session:
        await session.start("eagle3")
        final = await session.wait_status(SETTLED, timeout=60)
        assert final.phase is Phase.READY, final
        # Every phase this start goes through, in order, none skipped, each with its duration: the timeline
        # the status carries. The statuses published are one per batch of log lines read, so a phase the
        # simulator passes in a few milliseconds (its KV pool at the tests' --sim-time-scale) shares a batch with
        # the next one and is never the published phase; they must still never go backwards.
        # SGLang compiles only with --enable-torch-compile or DeepGEMM's JIT, which this mode has neither of.
        expected = [p for p in STARTUP_ORDER if p is not Phase.COMPILING]
        assert [p for p, _ in final.timeline] + [final.phase] == expected, final.timeline
        published = [p for p in seen.phases() if p in STARTUP_ORDER]
        assert published == sorted(published, key=STARTUP_ORDER.index), published
        assert published[0] is Phase.LAUNCHING and published[-1] is Phase.READY, published
        assert any("The server is fired up and ready to roll!" in line for line in seen.log_lines())
        pid = final.pid
        assert pid is not None and await remote_alive(session.host, pid)
        children = await session.host.run(f"pgrep -g {pid} -f sglang::scheduler")
        assert len(children.stdout.split()) == 2  # --tp 2: one scheduler child per rank

        await session.stop()
        assert session.status.phase is Phase.STOPPED
        assert not await remote_alive(session.host, pid)
        assert await group_members(session.host, pid) == []
        listening = await session.host.run(f"ss -Hltn 'sport = :{port}'")
        assert listening.stdout.strip() == ""


@pytest.mark.usefixtures("cleanup")
async def test_second_start_is_refused_and_a_new_client_attaches(
    sshd: Sshd, ssh_options: SSHOptions, host_cfg: HostConfig, cfg: Config
) -> None:
    async with running(make_session(sshd, ssh_options, host_cfg, cfg)) as first:
        await first.start("baseline")
        ready = await first.wait_status(SETTLED, timeout=60)
        assert ready.phase is Phase.READY
        with pytest.raises(ServerAlreadyRunning):
            await first.lifecycle.start(cfg.mode("baseline"))
    # The first client is gone; the server is not. A new client attaches instead of launching.
    seen = Recorder()
    async with running(make_session(sshd, ssh_options, host_cfg, cfg), seen) as second:
        status = await second.wait_status(SETTLED, timeout=30)
        assert status.phase is Phase.READY
        assert status.pid == ready.pid
        assert "attached" in status.note
        runs = await second.host.run(f"ls {host_cfg.state_dir}/runs")
        assert len(runs.stdout.split()) == 1  # attached: nothing was launched a second time


@pytest.mark.usefixtures("cleanup")
async def test_busy_port_is_refused_before_launch(
    sshd: Sshd, ssh_options: SSHOptions, host_cfg: HostConfig, cfg: Config, port: int
) -> None:
    # The sshd runs on this machine, so a local listener is "on the host".
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", port))
        blocker.listen()
        async with running(make_session(sshd, ssh_options, host_cfg, cfg)) as session:
            runs = f"ls {host_cfg.state_dir}/runs 2>/dev/null | wc -l"
            before = (await session.host.run(runs)).stdout
            with pytest.raises(PortBusy, match=f"port {port} on sim-host is already in use"):
                await session.start("baseline")
            after = (await session.host.run(runs)).stdout
            assert before == after  # nothing was launched
            assert session.status.phase is Phase.STOPPED


@pytest.mark.usefixtures("cleanup")
async def test_switch_stops_one_mode_and_starts_the_other(
    sshd: Sshd, ssh_options: SSHOptions, host_cfg: HostConfig, cfg: Config
) -> None:
    async with running(make_session(sshd, ssh_options, host_cfg, cfg)) as session:
        await session.start("baseline")
        first = await session.wait_status(SETTLED, timeout=60)
        assert first.phase is Phase.READY
        await session.switch("eagle3")
        second = await session.wait_status(SETTLED, timeout=60)
        assert (second.phase, second.mode) == (Phase.READY, "eagle3")
        assert second.pid != first.pid
        assert first.pid is not None and not await remote_alive(session.host, first.pid)


@pytest.mark.usefixtures("cleanup")
@IDLE_AND_HOGGED
async def test_crash_is_reported_with_the_runtime_error_line(
    sshd: Sshd, ssh_options: SSHOptions, host_cfg: HostConfig, cfg: Config, port: int, hog: bool
) -> None:
    """The crash reason is the engine's RuntimeError line, also with every core busy (the log is read to its
    end after the exit, however slowly)."""
    with cpu_hog(hog, seconds=300):
        await _crash_is_reported(sshd, ssh_options, host_cfg, cfg, port)


async def _crash_is_reported(sshd: Sshd, ssh_options: SSHOptions, host_cfg: HostConfig, cfg: Config, port: int) -> None:
    async with running(make_session(sshd, ssh_options, host_cfg, cfg)) as session:
        await session.start("crash")
        assert (await session.wait_status(SETTLED, timeout=60)).phase is Phase.READY
        local = await session.host.forward(port)
        # 12 concurrent requests push the batch past 10: the simulated dynamic-disable patch dies.
        load = asyncio.create_task(overload(local))
        final = await session.wait_status([Phase.CRASHED, Phase.EXITED], timeout=30)
        await load
        assert final.phase is Phase.CRASHED
        assert final.crash is not None
        assert "RuntimeError: The size of tensor a (160) must match the size of tensor b (2)" in final.crash.reason


@pytest.mark.usefixtures("cleanup")
async def test_reconnect_mid_startup_loses_and_repeats_no_log_line(
    make_sshd: object, ssh_options: SSHOptions, host_cfg: HostConfig, tmp_path: Path, port: int
) -> None:
    server: Sshd = make_sshd("flaky")  # type: ignore[operator]
    known = tmp_path / "kh"
    known.write_text(server.known_hosts_line() + "\n")
    options = SSHOptions(**{**ssh_options.__dict__, "known_hosts": known, "keepalive_interval": 0.5})
    cfg = sim_config(tmp_path, port=port, time_scale=0.02)
    hc = replace(host_cfg, name="flaky", address=target(server))
    seen = Recorder()
    session = RemoteSession(SSHHost(target(server), options), hc, cfg)
    async with running(session, seen):
        await session.start("eagle3")
        await session.wait_status([Phase.LOADING_WEIGHTS, Phase.ALLOCATING_KV, Phase.CAPTURING_GRAPHS], timeout=60)
        server.stop()  # the sshd process dies; the simulator (its own session) keeps running
        await seen.wait_for(lambda events: any(isinstance(e, Lost) for e in events), timeout=20)
        server.start()
        await seen.wait_for(lambda events: sum(isinstance(e, Connected) for e in events) >= 2, timeout=30)
        final = await session.wait_status(SETTLED, timeout=60)
        assert final.phase is Phase.READY
        log_path = session._record.log_path if session._record else ""
        whole = (await session.host.run(f"cat {log_path}")).stdout
    # The batches carry the tracker's cleaned lines (trailing blanks dropped): compare them cleaned.
    got, want = [x.rstrip() for x in seen.log_lines()], [x.rstrip() for x in split_lines(whole)]
    # Lines keep arriving after ready (warmup's access lines): what arrived must be exactly the file's start.
    assert got == want[: len(got)]
    assert any("fired up and ready to roll" in line for line in got)
    assert session.host.generation == 2
