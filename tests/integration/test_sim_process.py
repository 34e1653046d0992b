"""The simulator's process tree behaves like SGLang's: titled TP children, a draining SIGTERM that takes the
children along, and orphans when only the parent is SIGKILLed."""

from __future__ import annotations

import asyncio
import os
import signal

import aiohttp

from tests.support.sim_harness import READY, SimProcess, Simulators, probe_health, stream_generate

TP2 = ("--model-path", "/models/kimi", "--tp", "2")


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def _ppid(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _children(proc: SimProcess) -> list[int]:
    return [pid for pid in proc.group_pids() if pid != proc.pid]


async def test_children_carry_sglang_titles(sim: Simulators) -> None:
    proc = await sim(*TP2, scale=0.003)
    await proc.wait_for(READY, 20)
    titles = sorted(_cmdline(pid) for pid in _children(proc))
    assert titles == ["sglang::scheduler_TP0", "sglang::scheduler_TP1"]


async def test_sigterm_drains_then_exits_with_its_children(sim: Simulators) -> None:
    proc = await sim(*TP2, scale=0.003)
    port = proc.port
    await proc.wait_for(READY, 20)
    async with aiohttp.ClientSession() as s:
        stream = asyncio.ensure_future(stream_generate(s, port, 120))
        await proc.wait_for(r"Prefill batch, #new-seq: 1, #new-token: \d+", 5)
        proc.signal(signal.SIGTERM)
        await proc.wait_for(r"SIGTERM received\. signum=None frame=None\. Draining requests and shutting down\.\.\.", 5)
        assert await probe_health(port) == 503
        await proc.wait_for(r"Health check request received during shutdown\. Returning 503\.", 5)
        await proc.wait_for(r"Gracefully exiting\.\.\. Remaining number of requests 1\. Remaining requests "
                            r"remaining_rids=\['[0-9a-f]{32}'\]\.", 5)  # fmt: skip
        rec = await stream
        assert rec.final_tokens == 120, "in-flight streams finish before the exit"
    await proc.wait_for(r"Gracefully exiting\.\.\. Remaining number of requests 0\.", 5)
    assert await proc.wait_exit(5) == -9
    await proc.wait_gone()


async def test_sigterm_during_load_takes_children_along(sim: Simulators) -> None:
    proc = await sim(*TP2, scale=0.003)
    await proc.wait_for(r"TP0\] Load weight begin", 20)
    proc.signal(signal.SIGTERM)
    assert await proc.wait_exit(5) == -signal.SIGTERM
    await proc.wait_gone()


async def test_sigkill_of_the_parent_alone_leaves_orphans(sim: Simulators) -> None:
    proc = await sim(*TP2, scale=0.003)
    port = proc.port
    await proc.wait_for(READY, 20)
    children = _children(proc)
    assert len(children) == 2
    proc.signal(signal.SIGKILL)
    assert await proc.wait_exit(5) == -9
    await asyncio.sleep(0)  # let the kernel re-parent; the assertion below does not depend on timing
    survivors = _children(proc)
    assert sorted(survivors) == sorted(children), "TP children outlive a SIGKILLed launcher"
    for pid in survivors:
        assert _ppid(pid) != proc.pid
        assert "sglang::scheduler_TP" in _cmdline(pid)
    assert await probe_health(port) is None, "the port died with the launcher"
    proc.kill_group()  # the cleanup a supervisor must do: the process group, not the PID
    await proc.wait_gone()
    assert os.getpgid(os.getpid()) != proc.pid


async def test_exit_with_follows_a_vanished_process_out(sim: Simulators) -> None:
    """`--sim-exit-with PID` (the demo's): when PID is gone, the simulator and its TP children exit."""
    keeper = await asyncio.create_subprocess_exec("sleep", "60")
    proc = await sim(*TP2, "--sim-exit-with", str(keeper.pid), scale=0.003)
    await proc.wait_for(READY, timeout=30)
    assert len(proc.group_pids()) >= 3  # main + 2 TP children
    keeper.kill()
    await keeper.wait()
    await proc.wait_exit(timeout=10)
    await proc.wait_for("is gone; exiting with the whole tree", timeout=5, from_start=True)
    # SIGKILL is delivered asynchronously: a child may still be running its exit for a moment (ci13 saw both
    # TP children there right after the launcher's exit), so wait for the group with a deadline.
    await proc.wait_gone(timeout=10)
