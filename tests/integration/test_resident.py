"""Resident modes over the real sshd with the real simulator: a switch sleeps the live server and wakes the
other, verified; every failure of a sleep or a wake falls back to a stop or a restart and says why.

The host is a sshd of its own whose sessions find the simulator's `nvidia-smi` on PATH, with two pretend
GPUs in a directory of the test's, so a sleep's release is read the way a real host's is.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from specdash.bench.store import Store
from specdash.config import HostConfig
from specdash.core.resident import RELEASED_FLOOR_MIB
from specdash.errors import SpecdashError
from specdash.phases import Phase
from specdash.remote.ssh import SSHHost, SSHOptions
from specdash.server import resident
from specdash.server.remote_session import RemoteSession, running
from specdash.sim.gpus import COUNT_ENV, DIR_ENV
from tests.integration.conftest import target
from tests.support.eventually import eventually
from tests.support.ports import free_port
from tests.support.remote_sim import SRC, remote_python, sim_config, with_host
from tests.support.sshd import Keys, Sshd, make_dir

READY = (Phase.READY, Phase.CRASHED, Phase.EXITED)


def resident_modes(gpu_dir: Path, fault: str = "") -> str:
    """Two resident modes beside the config's: a baseline and an EAGLE-3 one (which carries `fault`), whose
    simulated GPUs live in `gpu_dir` (the test's own: other tests' simulators use the default one)."""
    faults = f', "--sim-fault", "{fault}"' if fault else ""
    env = f'env = {{ {DIR_ENV} = "{gpu_dir}", {COUNT_ENV} = "2" }}'
    return f"""
[modes.r-base]
extends = "baseline"
port = {free_port()}
resident = true
{env}

[modes.r-eagle]
extends = "eagle3"
port = {free_port()}
resident = true
args = ["--sim-seed", "1"{faults}]
{env}
"""


@pytest.fixture
def host_ram_mib() -> int:
    """The simulated host's available RAM (what the memory plan reads)."""
    return 1024 * 1024


@pytest.fixture
def gpu_host(make_sshd: Callable[..., Sshd], host_ram_mib: int) -> tuple[Sshd, Path]:
    """A sshd whose sessions have the simulator's nvidia-smi (2 GPUs, state in a fresh directory)."""
    gpu_dir = make_dir("specdash-gpus-")
    gpu_dir.chmod(0o777)
    bin_dir = make_dir("specdash-bin-")
    import sysconfig

    smi = bin_dir / "nvidia-smi"
    smi.write_text(
        f'#!/bin/sh\nexport {DIR_ENV}="{gpu_dir}" {COUNT_ENV}=2 PYTHONPATH="{SRC}:{sysconfig.get_paths()["purelib"]}"\n'
        f'exec "{remote_python()}" -m specdash.sim.gpus "$@"\n'
    )
    smi.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin", "SPECDASH_SIM_HOST_RAM_MIB": str(host_ram_mib)}
    return make_sshd("resident", set_env=env), gpu_dir


@pytest.fixture
def make_session(
    tmp_path: Path, gpu_host: tuple[Sshd, Path], ssh_options: SSHOptions, known_hosts: Path
) -> Callable[..., RemoteSession]:
    server, gpu_dir = gpu_host
    known_hosts.write_text(known_hosts.read_text() + server.known_hosts_line() + "\n")

    def make(fault: str = "", modes: Callable[[Path], str] | None = None) -> RemoteSession:
        extra = modes(gpu_dir) if modes is not None else resident_modes(gpu_dir, fault)
        cfg = sim_config(tmp_path, port=free_port(), time_scale=0.005, tp=2, extra_modes=extra)
        host = HostConfig(name="gpu-host", address=target(server), state_dir=f"~/.specdash-tests/{uuid.uuid4().hex}")
        return RemoteSession(SSHHost(target(server), ssh_options), host, cfg, store=Store(tmp_path / "results.db"))

    return make


@pytest.fixture
async def session(
    make_session: Callable[..., RemoteSession], request: pytest.FixtureRequest
) -> AsyncIterator[RemoteSession]:
    fault = getattr(request, "param", "")
    s = make_session(fault)
    async with running(s):
        yield s
        # Whatever the test left: the live run and every sleeping one, by their records.
        for sleeper in await resident.sleepers(s):
            await s.lifecycle.stop(sleeper.record, grace=5)
        if s.server_live():
            await s.stop()


async def ready(session: RemoteSession, mode: str) -> None:
    status = await session.wait_status(READY, timeout=120)
    assert status.phase is Phase.READY and status.mode == mode, status


async def test_a_switch_between_two_resident_modes_sleeps_one_and_wakes_the_other_verified(
    session: RemoteSession,
) -> None:
    await session.start("r-eagle")
    await ready(session, "r-eagle")
    first = await session.switch("r-base")  # nothing sleeps yet: r-eagle sleeps, r-base starts
    assert not first.resident and not first.why_restart and not first.notes, first
    await ready(session, "r-base")
    sleepers = await resident.sleepers(session)
    assert [s.record.mode for s in sleepers] == ["r-eagle"]
    eagle = sleepers[0]
    # Released per GPU, measured from nvidia-smi on the host, and its accept length kept for the wake.
    assert eagle.asleep_mib and all(v <= RELEASED_FLOOR_MIB for v in eagle.asleep_mib.values()), eagle
    assert max(eagle.awake_mib.values()) > 10 * RELEASED_FLOOR_MIB
    assert eagle.accept is not None and eagle.accept > 1.0

    back = await session.switch("r-eagle")  # r-base sleeps, r-eagle wakes and is verified
    assert back.resident, back
    assert back.total == 8 and back.identical == 8
    assert back.accept is not None
    assert "switched to r-eagle in" in back.text and "verified 8/8 identical" in back.text
    await ready(session, "r-eagle")
    assert session.status.pid == eagle.record.pid  # the same process, woken, not a new one
    assert [s.record.mode for s in await resident.sleepers(session)] == ["r-base"]
    modes = {m.name: m.resident for m in session._modes_event().modes}
    assert modes["r-eagle"] == "awake" and modes["r-base"].startswith("asleep (")
    assert modes["baseline"] == ""


async def _wake_falls_back(session: RemoteSession, evidence: str) -> None:
    await session.start("r-eagle")
    await ready(session, "r-eagle")
    await session.switch("r-base")
    await ready(session, "r-base")
    (eagle,) = await resident.sleepers(session)
    outcome = await session.switch("r-eagle")
    assert not outcome.resident, outcome
    assert evidence in outcome.why_restart, outcome.why_restart
    assert outcome.text.startswith("restarting r-eagle: ")
    await ready(session, "r-eagle")
    assert session.status.pid != eagle.record.pid  # a fresh server ...
    alive = await session.lifecycle.current(eagle.record.id)
    assert alive is not None and not alive.alive  # ... and the one that failed to wake is gone


@pytest.mark.parametrize(
    ("session", "evidence"),
    [
        ("wake-404", "POST /resume_memory_occupation answered 404"),
        ("wake-500", "POST /resume_memory_occupation answered 500: "),
        ("wake-corrupts", "wrong answers after the wake: 0/8 identical"),
    ],
    indirect=["session"],
)
async def test_a_wake_that_fails_falls_back_to_a_restart_and_says_why(session: RemoteSession, evidence: str) -> None:
    await _wake_falls_back(session, evidence)


@pytest.mark.parametrize("session", ["wake-hangs"], indirect=True)
async def test_a_wake_that_never_finishes_falls_back_to_a_restart(
    session: RemoteSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resident, "WAKE_TIMEOUT_S", 2.0)
    await _wake_falls_back(session, "POST /resume_memory_occupation did not answer within 2 s")


@pytest.mark.parametrize(
    ("session", "evidence"),
    [
        ("sleep-500", "POST /release_memory_occupation answered 500"),
        ("sleep-holds-memory", "r-eagle said it sleeps but holds its memory 2 s later: GPU0 "),
    ],
    indirect=["session"],
)
async def test_a_sleep_that_fails_stops_the_server_instead_and_says_why(
    session: RemoteSession, evidence: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resident, "RELEASE_TIMEOUT_S", 2.0)
    await session.start("r-eagle")
    await ready(session, "r-eagle")
    pid = session.status.pid
    outcome = await session.switch("r-base")
    assert any(evidence in note and "stopped it instead" in note for note in outcome.notes), outcome.notes
    await ready(session, "r-base")
    assert await resident.sleepers(session) == []
    assert pid != session.status.pid


async def test_restart_forces_a_restart_of_a_sleeping_mode(session: RemoteSession) -> None:
    await session.start("r-base")
    await ready(session, "r-base")
    await session.switch("r-eagle")
    await ready(session, "r-eagle")
    (base,) = await resident.sleepers(session)
    outcome = await session.switch("r-base", restart=True)
    assert not outcome.resident and outcome.why_restart == "a restart was asked for (--restart)"
    await ready(session, "r-base")
    assert session.status.pid != base.record.pid
    await eventually(
        lambda: session.lifecycle.current(base.record.id),
        until=lambda r: r is not None and not r.alive,
        timeout=30,
        what="the sleeping r-base stopped",
    )


@pytest.mark.parametrize("host_ram_mib", [64 * 1024])
async def test_a_server_that_would_not_fit_beside_a_sleeping_one_is_refused_with_the_numbers(
    session: RemoteSession,
) -> None:
    await session.start("r-eagle")
    await ready(session, "r-eagle")
    eagle_pid = session.status.pid
    # r-eagle sleeps; r-base would need its weights in host RAM beside r-eagle's when it sleeps in turn.
    with pytest.raises(SpecdashError) as err:
        await session.switch("r-base")
    message = err.value.message
    assert message.startswith("memory plan: the resident servers do not fit; ")
    assert (
        "host RAM for sleeping weights " in message and "of 64.0 GiB available (at most 90%): does not fit" in message
    )
    assert message.endswith("Not started: stop the sleeping ones (r-eagle) with 'specdash down'")
    (eagle,) = await resident.sleepers(session)  # nothing lost: r-eagle sleeps, ready to wake
    assert eagle.record.pid == eagle_pid
    back = await session.switch("r-eagle")
    assert back.resident and back.identical == back.total == 8, back


def test_the_cli_switch_status_and_down_with_a_sleeping_server(
    tmp_path: Path, gpu_host: tuple[Sshd, Path], ssh_keys: Keys, known_hosts: Path
) -> None:
    server, gpu_dir = gpu_host
    known_hosts.write_text(known_hosts.read_text() + server.known_hosts_line() + "\n")
    cfg = sim_config(tmp_path, port=free_port(), time_scale=0.005, tp=2, extra_modes=resident_modes(gpu_dir))
    state = f"~/.specdash-tests/{uuid.uuid4().hex}"
    env = {
        **with_host(cfg, "gpu", target(server), ssh_keys.client_key, known_hosts, state),
        "XDG_DATA_HOME": str(tmp_path),
    }

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "specdash", *args], capture_output=True, text=True, env=env, timeout=180
        )

    try:
        up = cli("up", "gpu", "--mode", "r-eagle", "--wait")
        assert up.returncode == 0, up.stderr
        first = cli("switch", "gpu", "r-base", "--wait")  # r-eagle sleeps, r-base starts
        assert first.returncode == 0, first.stderr
        assert "\nstarting r-base" in first.stdout and "could not sleep" not in first.stdout, first.stdout
        assert "stopping" not in first.stdout  # it sleeps: never shown as stopping
        status = cli("status", "gpu")
        assert status.returncode == 0 and "mode r-base" in status.stdout
        assert re.search(r"asleep: r-eagle, pid \d+, port \d+, 0\.\d GiB held on its busiest GPU", status.stdout)
        back = cli("switch", "gpu", "r-eagle")  # woken and verified: live at once
        assert back.returncode == 0, back.stderr
        assert "\nswitched to r-eagle in " in back.stdout, back.stdout
        assert "(verified 8/8 identical, accept length " in back.stdout
        assert re.search(
            r"sleep r-base [\d.]+ s, find sleeping [\d.]+ s, .*wake [\d.]+ s, verify [\d.]+ s", back.stdout
        )
        down = cli("down", "gpu")  # not a terminal: it lists what it stops, then stops them all
        assert down.returncode == 0, down.stderr
        assert re.search(
            r"stopping 2 server\(s\) on gpu: r-eagle \(pid \d+, running\), r-base \(pid \d+, asleep", down.stdout
        )
        assert down.stdout.count("stopped run ") == 2
        after = cli("status", "gpu", "--json")
        assert json.loads(after.stdout)["sleeping"] == []
    finally:
        cli("down", "gpu", "--yes", "--grace", "5")


def vllm_resident_modes(gpu_dir: Path) -> str:
    """Two resident vLLM modes on the simulator's vLLM 0.24 wording: a baseline and an n-gram one."""
    env = f'env = {{ {DIR_ENV} = "{gpu_dir}", {COUNT_ENV} = "2" }}'
    ngram = json.dumps({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2})
    return f"""
[modes.v-base]
extends = "baseline"
engine = "vllm"
port = {free_port()}
resident = true
args = ["--sim-log-style", "vllm-0.24", "--tp", "2", "--sim-time-scale", "0.005", "--sim-seed", "1"]
{env}

[modes.v-ngram]
extends = "v-base"
port = {free_port()}
resident = true
args = ["--sim-log-style", "vllm-0.24", "--tp", "2", "--sim-time-scale", "0.005", "--sim-seed", "1",
        "--speculative-config", {json.dumps(ngram)}]
{env}
"""


async def test_a_switch_between_two_resident_vllm_modes_sleeps_and_wakes_by_vllms_routes(
    make_session: Callable[..., RemoteSession],
) -> None:
    """The same switch on vLLM's sleep mode (`/sleep?level=1`, `/wake_up`, `/is_sleeping`), which the
    simulator serves only with `--enable-sleep-mode` and `VLLM_SERVER_DEV_MODE=1`: specdash adds both."""
    s = make_session(modes=vllm_resident_modes)
    async with running(s):
        try:
            await s.start("v-ngram")
            await ready(s, "v-ngram")
            first = await s.switch("v-base")
            assert not first.resident and not first.notes, first
            await ready(s, "v-base")
            (ngram,) = await resident.sleepers(s)
            assert ngram.record.mode == "v-ngram"
            assert ngram.asleep_mib and all(v <= RELEASED_FLOOR_MIB for v in ngram.asleep_mib.values()), ngram
            back = await s.switch("v-ngram")
            assert back.resident and back.total == back.identical == 8, back
            assert back.accept is not None and back.accept > 1.0  # n-gram's accept length, from vLLM's counters
            await ready(s, "v-ngram")
            assert s.status.pid == ngram.record.pid
        finally:
            for sleeper in await resident.sleepers(s):
                await s.lifecycle.stop(sleeper.record, grace=5)
            if s.server_live():
                await s.stop()
