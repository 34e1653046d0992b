"""A Slurm host for real: a login node (the test sshd) in front of a real slurmctld and two slurmd (n1, n2),
the simulator run as a two-node SGLang engine by `srun --label`, one step per node.

Covered: queued then running (with Slurm's reason and position), a two-node startup to ready and a sweep on it,
stop by `scancel` confirmed by the job's end, attach after a new connection, a rank dying, a node's slurmd
killed mid-startup (NODE_FAIL), a job cancelled by someone else, the time limit, a job pending past what its
partition allows, a partition that does not exist (sbatch refuses), an account the partition does not take
(pends for good, said), and a job id that is not ours; a tune whose restarts are new jobs (queue wait apart),
and the host probe run as a step of the job on its head node.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
import sysconfig
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from specdash.bench.probe import ProbeSettings
from specdash.bench.sweep_data import SweepConfig
from specdash.config import Config, HostConfig, SlurmConfig
from specdash.core.events import LogBatch, Notice, ServerStatus
from specdash.errors import SpecdashError
from specdash.phases import SETTLED, Phase
from specdash.remote.events import Connected, Lost
from specdash.remote.ssh import SSHHost, SSHOptions
from specdash.server.remote_session import RemoteSession, running
from specdash.sim.gpus import COUNT_ENV, DIR_ENV
from specdash.tune.job import TuneJob, TuneOptions
from specdash.tune.plan import build_plan
from tests.integration.conftest import target, trust
from tests.support.eventually import eventually
from tests.support.ports import free_port
from tests.support.recorder import Recorder
from tests.support.remote_sim import QUICK_STARTUP, SRC, remote_python, sim_config
from tests.support.sim_harness import group_members
from tests.support.slurm import SlurmCluster
from tests.support.sshd import Sshd, make_dir

HANG_MODE = """
[modes.hang]
extends = "baseline"
args = ["--sim-fault", "hang-at=weights"]

[modes.slow]
extends = "baseline"
args = ["--sim-fault", "slow-node=1x100"]
"""


def slurm_config(tmp: Path, *, port: int, time_scale: float = QUICK_STARTUP) -> Config:
    """The simulator modes of `remote_sim.sim_config` for a two-node job (TP 2 over 2 nodes: one rank each),
    a mode that hangs while loading its weights, and one whose second node loads its weights 100 times slower."""
    return sim_config(tmp, port=port, time_scale=time_scale, extra_modes=HANG_MODE)


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def time_scale() -> float:
    """`QUICK_STARTUP`; a test that watches the startup itself parametrizes a slower one."""
    return QUICK_STARTUP


@pytest.fixture
def cfg(tmp_path: Path, port: int, time_scale: float) -> Config:
    return slurm_config(tmp_path, port=port, time_scale=time_scale)


@pytest.fixture
def login(sshd: Sshd, cluster: SlurmCluster) -> HostConfig:
    """The login node: the test sshd, with the cluster's SLURM_CONF and run files in the user's home."""
    base = f"~/.specdash-tests/slurm-{uuid.uuid4().hex[:10]}"
    return HostConfig(
        name="login",
        address=target(sshd),
        state_dir=f"{base}/state",
        env=cluster.env,
        slurm=SlurmConfig(partition=cluster.partition, nodes=2, output_dir=f"{base}/jobs", dist_port=free_port()),
    )


@pytest.fixture
async def session(
    sshd: Sshd, ssh_options: SSHOptions, login: HostConfig, cfg: Config
) -> AsyncIterator[tuple[RemoteSession, Recorder]]:
    seen = Recorder()
    async with running(RemoteSession(SSHHost(target(sshd), ssh_options), login, cfg), seen) as s:
        yield s, seen
        if s.server_live():
            with contextlib.suppress(SpecdashError):
                await s.stop()


def log_text(seen: Recorder) -> str:
    return "\n".join(line.text for e in seen.events if isinstance(e, LogBatch) for line in e.lines)


def statuses(seen: Recorder) -> list[ServerStatus]:
    return [e for e in seen.events if isinstance(e, ServerStatus)]


async def test_a_two_node_job_starts_serves_a_sweep_and_stops_by_scancel(
    session: tuple[RemoteSession, Recorder], cluster: SlurmCluster
) -> None:
    s, seen = session
    await s.start("baseline")
    job = s.status.job_id
    assert job.isdigit(), s.status
    status = await s.wait_status(SETTLED, timeout=120)
    assert status.phase is Phase.READY, (status, log_text(seen)[-2000:])
    assert status.ranks == (2, 2)
    assert status.queue_wait_s is not None and status.queue_wait_s >= 0
    text = log_text(seen)
    assert "0: " in text and "1: " in text, text[-1500:]  # both ranks' lines, told apart
    assert "TP1]" in text  # rank 1's own SGLang lines, from node n2
    assert cluster.job_state(job) == "RUNNING"
    # The head node's port through the login node: a real sweep of two levels.
    settings = ProbeSettings(output_len=24)
    quick = SweepConfig(requests_per_level=3, warmup_requests=1, processes=0, settings=settings)
    await s.sweep([], [1, 2], config=quick)
    result = s.results["baseline"]
    assert [lv.status for lv in result.levels] == ["done", "done"], result
    # An A/B: the second mode is a restart, i.e. a new job (its queue wait apart from its startup).
    await s.sweep(["baseline", "eagle3"], [1], config=quick)
    assert [lv.status for lv in s.results["eagle3"].levels] == ["done"]
    assert s.status.mode == "eagle3" and s.status.job_id != job and s.status.queue_wait_s is not None
    assert cluster.job_state(job) in ("CANCELLED", "COMPLETED")
    job = s.status.job_id
    await s.stop()
    assert s.status.phase is Phase.STOPPED
    assert cluster.job_state(job) in ("CANCELLED", "COMPLETED"), cluster.job_state(job)


@pytest.mark.parametrize("time_scale", [0.02])  # rank 0's weights must load while it is watched
async def test_the_slowest_rank_drives_the_phase_bar_and_eta(session: tuple[RemoteSession, Recorder]) -> None:
    """Rank 1 (node n2) loads its weights 100 times slower; rank 0 finishes its shards and waits for it at the
    KV cache's collective. The server is where rank 1 is: loading weights, without rank 0's finished bar."""
    s, seen = session
    await s.start("slow")
    behind = await eventually(
        lambda: s.status,
        until=lambda st: "slowest: rank 1 loading weights" in st.note,
        timeout=90,
        what="rank 1 behind rank 0",
    )
    assert behind.phase is Phase.LOADING_WEIGHTS, behind  # rank 0's own lines say "allocating KV cache"
    assert behind.progress is None, behind  # rank 1 draws no bar; rank 0's 64/64 is not the server's
    assert behind.ranks == (2, 2)
    assert behind.phase_started_at is not None and (behind.started_at or 0.0) <= behind.phase_started_at
    text = await eventually(
        lambda: log_text(seen), until=lambda t: "TP0] Load weight end" in t, timeout=30, what="rank 0 loaded"
    )
    assert "TP1] Load weight end" not in text, text[-1500:]  # rank 1 still loads
    ready = await s.wait_status(SETTLED, timeout=150)
    assert ready.phase is Phase.READY and ready.ranks == (2, 2), (ready, log_text(seen)[-1500:])
    # Rank 0 printed nothing of the KV cache's pool until rank 1 had loaded (the collective held it).
    text = log_text(seen)
    assert text.index("TP1] Load weight end") < text.index("TP0] KV Cache is allocated"), text[-2500:]


def gpu_nodes(port: int) -> tuple[dict[str, str], str, Path]:
    """The simulator's `nvidia-smi` on the nodes' PATH and a launcher for the simulator, both keeping each node's
    pretend GPUs in a directory of its own (`$SLURMD_NODENAME`): the two nodes are one machine here. Returns the
    environment for the login node (its jobs inherit it), the modes that use the launcher, and the GPUs' dir."""
    base = make_dir("specdash-gpus-")
    base.chmod(0o777)
    bin_dir = make_dir("specdash-bin-")
    pythonpath = f"{SRC}:{sysconfig.get_paths()['purelib']}"
    own = f'export {DIR_ENV}="{base}/${{SLURMD_NODENAME:-none}}" {COUNT_ENV}=2 PYTHONPATH="{pythonpath}"'
    for name, module in (("nvidia-smi", "specdash.sim.gpus"), ("sim-on-node", "specdash sim")):
        (bin_dir / name).write_text(f'#!/bin/sh\n{own}\nexec "{remote_python()}" -m {module} "$@"\n')
        (bin_dir / name).chmod(0o755)
    modes = f"""
[modes.gpus]
extends = "baseline"
launcher = ["{bin_dir}/sim-on-node"]

[modes.gpus-orphan]
extends = "gpus"
args = ["--sim-fault", "orphan-ranks"]
"""
    return {"PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin"}, modes, base


@pytest.mark.parametrize("mode", ["gpus", "gpus-orphan"])
async def test_after_scancel_each_nodes_gpu_memory_is_reported_released_or_held(
    sshd: Sshd,
    ssh_options: SSHOptions,
    login: HostConfig,
    tmp_path: Path,
    port: int,
    time_scale: float,
    cluster: SlurmCluster,
    mode: str,
) -> None:
    """The rank script looks at its node's GPUs once the engine has exited (nvidia-smi answers there: the
    simulator's); the stop says released, or names each GPU still held by ranks that outlived the job."""
    env, modes, gpus = gpu_nodes(port)
    cfg = sim_config(tmp_path, port=port, time_scale=time_scale, extra_modes=modes)
    host = replace(login, env={**login.env, **env})
    seen = Recorder()
    try:
        async with running(RemoteSession(SSHHost(target(sshd), ssh_options), host, cfg), seen) as s:
            await s.start(mode)
            assert (await s.wait_status(SETTLED, timeout=120)).phase is Phase.READY, log_text(seen)[-1500:]
            job = s.status.job_id
            await s.stop()
    finally:
        # The ranks this test's job left behind, by the PIDs in their GPU files (their titles hide the job's
        # environment from `reap_strays`).
        for pid in {int(f.stem.rsplit("-", 1)[1]) for f in gpus.glob("*/gpu*-*.json")}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert cluster.job_state(job) == "CANCELLED"
    said = [e for e in seen.events if isinstance(e, Notice) and e.text.startswith("stopped run")]
    assert len(said) == 1, said
    if mode == "gpus":
        assert "GPU memory released on n1, n2: at most 1 MiB used a GPU after the stop" in said[0].text, said
        assert said[0].severity == "information"
    else:  # rank 0 (GPU0 of n1) and rank 1 (GPU1 of n2) live on, out of the job's process groups
        assert "GPU0 on n1 still holds" in said[0].text and "GPU1 on n2 still holds" in said[0].text, said
        assert "GPU1 on n1" not in said[0].text and said[0].severity == "warning"


async def test_queued_behind_another_job_then_running(
    session: tuple[RemoteSession, Recorder], cluster: SlurmCluster
) -> None:
    s, seen = session
    blocker = cluster.run(
        "sbatch", "--parsable", "--output=/dev/null", "--nodes=2", "--exclusive", "--wrap", "sleep 300"
    ).stdout.strip()
    await eventually(lambda: cluster.job_state(blocker), until=lambda st: st == "RUNNING", timeout=30, what="blocker")
    await s.start("baseline")
    queued = await eventually(
        lambda: s.status, until=lambda st: st.queued.startswith("queued: Resources"), timeout=30, what="queued"
    )
    assert "1st of 1 pending in gpu" in queued.queued
    assert queued.phase is Phase.LAUNCHING
    cluster.run("scancel", blocker)
    status = await s.wait_status(SETTLED, timeout=120)
    assert status.phase is Phase.READY, log_text(seen)[-1500:]
    assert status.queue_wait_s is not None and status.queue_wait_s > 0
    assert not status.queued


async def test_attach_after_reconnect_to_the_recorded_job(
    sshd: Sshd, ssh_options: SSHOptions, login: HostConfig, cfg: Config, cluster: SlurmCluster
) -> None:
    async with running(RemoteSession(SSHHost(target(sshd), ssh_options), login, cfg)) as first:
        await first.start("baseline")
        await first.wait_status(SETTLED, timeout=120)
        job = first.status.job_id
    # A new specdash (a new connection) finds the job from its record and watches it; a second start refuses.
    async with running(RemoteSession(SSHHost(target(sshd), ssh_options), login, cfg)) as again:
        status = await again.wait_status([Phase.READY], timeout=60)
        assert status.job_id == job
        assert again._server_host() == "127.0.0.1"
        with pytest.raises(SpecdashError, match="already running"):
            await again.start("eagle3")
        await again.stop()
    assert cluster.job_state(job) in ("CANCELLED", "COMPLETED")


def rank_pids(port: int, rank: int) -> list[int]:
    """The engine processes of one rank of this test's job (its port and node rank in their command line)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [w.decode(errors="replace") for w in argv]
        if "sim" in words and f"{port}" in words and "--node-rank" in words:
            if words[words.index("--node-rank") + 1] == str(rank):
                found.append(int(proc.name))
    return found


async def test_a_rank_dying_is_a_crash_naming_the_rank(
    session: tuple[RemoteSession, Recorder], cluster: SlurmCluster, port: int
) -> None:
    s, seen = session
    await s.start("hang")  # both ranks stop (alive, silent) while loading weights
    await eventually(lambda: s.status, until=lambda st: st.ranks and st.ranks[0] >= 2, timeout=60, what="2 ranks")
    # Rank 1's engine (on n2) dies: the simulator of this test's port whose command says --node-rank 1.
    victims = rank_pids(port, 1)
    assert victims, "rank 1's process"
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    status = await s.wait_status([Phase.CRASHED], timeout=60)
    assert status.crash is not None
    assert "rank 1" in status.crash.reason or "rank 1" in status.note, (status, log_text(seen)[-1500:])
    assert any(isinstance(e, Notice) and e.severity == "error" for e in seen.events)


async def test_a_node_going_down_mid_startup_is_node_fail(
    session: tuple[RemoteSession, Recorder], cluster: SlurmCluster, port: int
) -> None:
    s, _ = session
    await s.start("hang")
    await eventually(lambda: s.status, until=lambda st: st.ranks and st.ranks[0] >= 2, timeout=60, what="2 ranks")
    groups = {os.getpgid(pid) for pid in rank_pids(port, 1) if on_node(pid, "n2")}  # its simulator and TP child
    assert groups, "rank 1's process on n2"
    cluster.kill_node("n2")
    status = await s.wait_status([Phase.CRASHED], timeout=90)
    assert status.crash is not None and "NODE_FAIL" in status.crash.reason, status
    # The dead node's rank outlives the job (no slurmd ends it); the cluster's reaping ends it, TP child included
    # (its title hides the environment the reaping looks for: it outlived four suite runs).
    cluster.reap_strays()
    await eventually(
        lambda: group_members(groups), until=lambda left: not left, timeout=15, what="the dead node's rank gone"
    )


def on_node(pid: int, node: str) -> bool:
    """Whether a process runs in a step on `node` (its environment says so)."""
    try:
        return f"SLURMD_NODENAME={node}".encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


async def test_scancel_by_someone_else_is_a_crash_that_says_so(
    session: tuple[RemoteSession, Recorder], cluster: SlurmCluster
) -> None:
    s, _ = session
    await s.start("baseline")
    await s.wait_status(SETTLED, timeout=120)
    cluster.run("scancel", s.status.job_id)  # root, not specdash
    status = await s.wait_status([Phase.CRASHED], timeout=60)
    assert status.crash is not None and "cancelled outside specdash" in status.crash.reason


async def test_a_job_asking_more_time_than_its_partition_pends_and_says_it_will_not_start(
    sshd: Sshd, ssh_options: SSHOptions, login: HostConfig, cfg: Config, cluster: SlurmCluster
) -> None:
    assert login.slurm is not None
    too_long = replace(login, slurm=replace(login.slurm, time_limit="3:00:00"))  # MaxTime=60 minutes
    seen = Recorder()
    async with running(RemoteSession(SSHHost(target(sshd), ssh_options), too_long, cfg), seen) as s:
        await s.start("baseline")
        note = await eventually(
            lambda: s.status.queued, until=lambda q: "will not start" in q, timeout=30, what="stuck reason"
        )
        assert "PartitionTimeLimit" in note
        assert any(isinstance(e, Notice) and "will not start" in e.text for e in seen.events)
        await s.stop()  # a pending job is cancelled too
        assert cluster.job_state(s.status.job_id or "0") in ("CANCELLED", "")


async def test_a_partition_that_does_not_exist_is_refused_by_sbatch_naming_it(
    sshd: Sshd, ssh_options: SSHOptions, login: HostConfig, cfg: Config, cluster: SlurmCluster
) -> None:
    assert login.slurm is not None
    wrong = replace(login, slurm=replace(login.slurm, partition="nosuch"))
    async with running(RemoteSession(SSHHost(target(sshd), ssh_options), wrong, cfg)) as s:
        with pytest.raises(SpecdashError, match=r"sbatch refused the job for 'baseline' on login: .*partition"):
            await s.start("baseline")
        assert s.status.phase is Phase.STOPPED
    assert not cluster.run("squeue", "-h").stdout.strip()


async def test_an_account_the_partition_does_not_take_pends_and_is_said_naming_it(
    sshd: Sshd, ssh_options: SSHOptions, login: HostConfig, cfg: Config, cluster: SlurmCluster
) -> None:
    """Slurm 22.05 without slurmdbd (this cluster: `accounting_storage/none`) does not refuse an unknown account
    at sbatch, even for a partition with `AllowAccounts=`: sbatch answers with a job id and the job pends for good
    with slurmctld's reason `Job's account not known, so it can't use this partition (lab allows lab)` (every
    account pends there: none is known without the accounting database). So specdash cannot say "nothing was
    submitted"; it says the job will not start, naming the account and the host, and its stop cancels it."""
    assert login.slurm is not None
    wrong = replace(login, slurm=replace(login.slurm, partition=cluster.account_partition, account="nosuch"))
    seen = Recorder()
    async with running(RemoteSession(SSHHost(target(sshd), ssh_options), wrong, cfg), seen) as s:
        await s.start("baseline")
        note = await eventually(
            lambda: s.status.queued, until=lambda q: "will not start" in q, timeout=30, what="stuck reason"
        )
        assert "the account 'nosuch' is not known to Slurm or not allowed in partition lab" in note, note
        told = [e.text for e in seen.events if isinstance(e, Notice) and e.severity == "warning"]
        assert any("on login" in t and "'nosuch'" in t for t in told), told
        job = s.status.job_id
        assert cluster.job_state(job) == "PENDING"
        await s.stop()
    assert cluster.job_state(job) == "CANCELLED"


async def test_adopting_a_job_that_is_not_ours_is_refused_and_nothing_is_signalled(
    session: tuple[RemoteSession, Recorder], cluster: SlurmCluster
) -> None:
    s, _ = session
    roots = cluster.run("sbatch", "--parsable", "--output=/dev/null", "--nodes=1", "--wrap", "sleep 300").stdout.strip()
    with pytest.raises(SpecdashError, match=f"job {roots} on login belongs to root"):
        await s.adopt_job(roots)
    with pytest.raises(SpecdashError, match="no job 999999 on login"):
        await s.adopt_job("999999")
    assert cluster.job_state(roots) in ("RUNNING", "PENDING")


async def test_the_time_limit_ends_the_job_as_timeout(
    sshd: Sshd, ssh_options: SSHOptions, login: HostConfig, cfg: Config, cluster: SlurmCluster
) -> None:
    """Slurm counts limits in minutes: the shortest one is 1 minute, checked about every 30 s (~90 s test)."""
    assert login.slurm is not None
    short = replace(login, slurm=replace(login.slurm, time_limit="1"))
    async with running(RemoteSession(SSHHost(target(sshd), ssh_options), short, cfg)) as s:
        await s.start("baseline")
        assert (await s.wait_status(SETTLED, timeout=120)).phase is Phase.READY
        status = await s.wait_status([Phase.CRASHED], timeout=150)
        assert status.crash is not None and "time limit (TIMEOUT)" in status.crash.reason, status


async def test_the_login_nodes_connection_cut_and_restored_keeps_the_job_watched(
    make_sshd: Callable[..., Sshd], ssh_options: SSHOptions, login: HostConfig, cfg: Config, cluster: SlurmCluster
) -> None:
    server = make_sshd("login-cut")
    assert ssh_options.known_hosts is not None
    trust(Path(ssh_options.known_hosts), server)
    seen = Recorder()
    host_cfg = replace(login, address=target(server))
    async with running(RemoteSession(SSHHost(target(server), ssh_options), host_cfg, cfg), seen) as s:
        await s.start("baseline")
        assert (await s.wait_status(SETTLED, timeout=120)).phase is Phase.READY
        job = s.status.job_id
        server.signal_sessions(signal.SIGKILL)  # the connection drops; the listener stays
        await seen.wait_for(lambda ev: any(isinstance(e, Lost) for e in ev), timeout=30)
        await seen.wait_for(lambda ev: sum(isinstance(e, Connected) for e in ev) >= 2, timeout=60)
        assert cluster.job_state(job) == "RUNNING"  # the job never depended on the connection
        assert s.status.phase is Phase.READY and s.status.job_id == job
        await s.stop()
        assert cluster.job_state(job) in ("CANCELLED", "COMPLETED")


@pytest.mark.parametrize("content", ["", "\n", "../x\n", "\x00\x00"], ids=["empty", "newline", "path", "nul"])
async def test_a_damaged_job_record_is_reported_and_nothing_is_submitted(
    sshd: Sshd, ssh_options: SSHOptions, login: HostConfig, cfg: Config, cluster: SlurmCluster, content: str
) -> None:
    """An empty or garbled `current` never reads as "no job": a job it named may still run, so a start that
    would submit a second one is refused, naming the record."""
    async with running(RemoteSession(SSHHost(target(sshd), ssh_options), login, cfg)) as s:
        state = shlex.quote(login.state_dir.removeprefix("~/"))
        wrote = await s.host.run(f"mkdir -p {state}/slurm && cat > {state}/slurm/current", stdin=content)
        assert wrote.ok, wrote.stderr
        record = await s.lifecycle.current()
        assert record is not None and record.damaged, record
        with pytest.raises(SpecdashError, match=r"job record \? on login is damaged .*nothing was submitted"):
            await s.start("baseline")
    assert not cluster.run("squeue", "-h").stdout.strip()


async def test_a_tune_on_a_slurm_host_restarts_each_setting_as_a_new_job_with_its_queue_wait_apart(
    sshd: Sshd, ssh_options: SSHOptions, login: HostConfig, cfg: Config, cluster: SlurmCluster, tmp_path: Path
) -> None:
    """Baseline and one EAGLE-3 setting, two small levels, one pass, on a one-node job each. The first job waits
    behind a job holding both nodes: its queue wait is journalled and reported apart from its seconds to ready."""
    assert login.slurm is not None
    one = replace(login, slurm=replace(login.slurm, nodes=1))
    plan = build_plan(
        cfg, host="login", mode="eagle3", baseline="baseline", space="steps=1 topk=1 draft=2", levels=(1, 2),
        repeats=1, name="slurm-tune",
    )  # fmt: skip
    options = TuneOptions(requests_per_level=4, output_len=16, journal_dir=tmp_path / "j", verify=False)
    blocker = cluster.run(
        "sbatch", "--parsable", "--output=/dev/null", "--nodes=2", "--exclusive", "--wrap", "sleep 300"
    ).stdout.strip()
    seen = Recorder()
    async with running(RemoteSession(SSHHost(target(sshd), ssh_options), one, cfg), seen) as s:
        try:
            await eventually(
                lambda: cluster.job_state(blocker), until=lambda st: st == "RUNNING", timeout=30, what="blocker"
            )
            tune = asyncio.create_task(TuneJob(s, plan, options).run())
            await eventually(
                lambda: s.status.queued, until=lambda q: q.startswith("queued: Resources"), timeout=60, what="queued"
            )
            first = s.status.job_id
            assert cluster.job_state(first) == "PENDING"
            cluster.run("scancel", blocker)
            outcome = await asyncio.wait_for(tune, 300)
        finally:
            cluster.run("scancel", blocker)
            if s.server_live():
                with contextlib.suppress(SpecdashError):
                    await s.stop()
    out = outcome.out
    assert out["aborted"] is None, out["aborted"]
    assert set(out["measured"]) == {"baseline", "s1-k1-d2"}, out["measured"]
    assert out["policy"]["ranges"], "a policy"
    startups = [r for r in journal_records(tmp_path / "j" / "slurm-tune.jsonl") if r["type"] == "startup"]
    assert [r["candidate"] for r in startups] == ["baseline", "s1-k1-d2"], startups
    jobs = [r["job_id"] for r in startups]
    assert jobs[0] == first and len(set(jobs)) == 2, "each restart is a new job"
    assert all(cluster.job_state(j) in ("CANCELLED", "COMPLETED") for j in jobs)
    waited = startups[0]
    assert waited["queue_wait_s"] > 0 and waited["seconds"] + waited["queue_wait_s"] <= waited["total_s"] + 0.01
    assert waited["seconds"] < waited["total_s"], "the startup is counted without the queue wait"
    assert [(j["job_id"], j["queue_wait_s"]) for j in out["jobs"]] == [
        (r["job_id"], r["queue_wait_s"]) for r in startups
    ]


def journal_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def test_the_host_probe_runs_on_the_head_node_as_a_step_of_the_job(
    session: tuple[RemoteSession, Recorder], cluster: SlurmCluster
) -> None:
    """`probe = "host"` on a Slurm host: the agent runs as a step of the server's own job on its head node (rank
    0's node of the two), not on the login node. Its own record says so from inside: the node, job and step that
    slurmstepd put in its environment (a process on the login node has none of them)."""
    s, seen = session
    await s.start("baseline")
    status = await s.wait_status(SETTLED, timeout=120)
    assert status.phase is Phase.READY, log_text(seen)[-1500:]
    marks = [line.split()[3] for line in log_text(seen).splitlines() if line.startswith("specdash: head node ")]
    assert marks, log_text(seen)[-1500:]
    head = marks[0]
    on_host = SweepConfig(
        requests_per_level=3, warmup_requests=1, processes=0, probe="host", settings=ProbeSettings(output_len=24)
    )
    await s.sweep([], [1, 2], config=on_host)
    result = s.results["baseline"]
    assert [lv.status for lv in result.levels] == ["done", "done"], result
    probe = result.probe or {}
    assert probe.get("where") == "host", probe
    assert probe.get("agent_job") == status.job_id and probe.get("agent_node") == head, probe
    assert probe.get("agent_step", "").isdigit(), probe  # a step of its own beside the engine's step 0
    assert cluster.job_state(status.job_id) == "RUNNING"
