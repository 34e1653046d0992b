"""A fleet row folded from a session's events (`core.fleet.HostRow`): pure logic."""

from __future__ import annotations

from specdash.core.events import GpuSample, GpuStats, Notice, ServerLoad, ServerStatus
from specdash.core.fleet import HostRow
from specdash.phases import CrashInfo, Phase, Progress
from specdash.remote.events import Connected, Lost


def test_a_starting_job_shows_its_stage_progress_and_ranks() -> None:
    row = HostRow("cluster")
    assert row.state == "connecting"
    assert row.apply(Connected("cluster", 1))
    status = ServerStatus(
        Phase.LOADING_WEIGHTS, mode="eagle3", engine="sglang", progress=Progress(3, 8, "shards"), ranks=(1, 2)
    )
    assert row.apply(status)
    assert (row.engine, row.mode, row.state, row.ranks) == ("sglang", "eagle3", "loading weights 3/8", "1/2")
    assert not row.apply(status)  # the same snapshot again changes nothing shown


def test_queued_then_ready_with_load_and_gpus() -> None:
    row = HostRow("cluster")
    row.apply(Connected("cluster", 1))
    row.apply(ServerStatus(Phase.LAUNCHING, mode="base", queued="queued: Resources (1st of 1 pending in gpu)"))
    assert row.state == "queued"
    row.apply(ServerStatus(Phase.READY, mode="base", ranks=(2, 2)))
    row.apply(ServerLoad(tok_s=1234.5, running=7, accept_len=None, at=1.0))
    row.apply(GpuStats((GpuSample(0, 80.0, 40 * 1024, 80 * 1024), GpuSample(1, 60.0, 40 * 1024, 80 * 1024))))
    assert (row.state, row.ranks, row.load, row.running, row.gpu) == ("ready", "2/2", "1,234", 7, "70% 80/160G")


def test_alerts_crash_lost_link_and_collapsing_acceptance() -> None:
    row = HostRow("gpu-a")
    row.apply(Connected("gpu-a", 1))
    command = ("python", "-m", "sglang.launch_server", "--speculative-algorithm", "EAGLE3")
    row.apply(ServerStatus(Phase.READY, mode="eagle3", command=command))
    row.apply(ServerLoad(tok_s=500.0, running=4, accept_len=1.05, at=2.0))
    assert row.alert.startswith("acceptance 1.05: collapsing toward 1.0") and row.alert_level == "warning"
    row.apply(ServerStatus(Phase.CRASHED, mode="eagle3", crash=CrashInfo("RuntimeError: CUDA error")))
    assert row.alert == "crashed: RuntimeError: CUDA error" and row.alert_level == "error"
    assert row.load == "-"  # no numbers from a server that is gone
    row.apply(Lost("gpu-a", "Keepalive timeout"))
    assert row.state == "lost" and row.alert == "link lost: Keepalive timeout"
    row.apply(Notice("a note", "information"))
    assert row.alert == "link lost: Keepalive timeout"  # information is not an alert


def test_a_plain_mode_at_acceptance_one_is_no_alert() -> None:
    row = HostRow("gpu-b")
    row.apply(ServerStatus(Phase.READY, mode="base", command=("python", "-m", "sglang.launch_server")))
    row.apply(ServerLoad(tok_s=500.0, running=4, accept_len=1.0, at=2.0))
    assert row.alert == ""
