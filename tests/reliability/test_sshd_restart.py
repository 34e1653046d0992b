"""sshd on the remote host is killed and restarted, ten times, under a live log follower."""

from __future__ import annotations

import asyncio
import functools
import time
from pathlib import Path

import pytest

from specdash.remote.events import Connected, ConnectionEvent
from specdash.remote.ssh import SSHHost
from specdash.server.logfollow import LogFollower
from tests.reliability.conftest import RemoteHost, timing
from tests.support.eventually import eventually
from tests.support.sshd import TEST_HOME, _comm

pytestmark = pytest.mark.netns

CYCLES = 10


def tails(remote: RemoteHost) -> list[int]:
    """The `tail` processes inside the host's namespace: every one of them is ours (its own namespace)."""
    return [pid for pid in remote.ns.pids() if _comm(pid) == "tail"]


def _one_new_tail(now: list[int], before: list[int]) -> bool:
    return len(now) == 1 and now != before


def _connected_since(events: list[tuple[float, ConnectionEvent]], since: float) -> bool:
    return any(isinstance(e, Connected) and t >= since for t, e in events)


async def test_sshd_kill_and_restart_ten_times(remote: RemoteHost, tmp_path: Path) -> None:
    """Nothing lost: every line appended to the followed file (including while sshd was down) arrives
    exactly once and in order; after each restart the host reconnects within the back-off, and the tail
    of the old connection is reaped, so exactly one remote `tail` runs after every cycle (no accumulation)."""
    log = TEST_HOME / f"reliability-{tmp_path.name}.log"
    events: list[tuple[float, ConnectionEvent]] = []
    got: list[str] = []
    arrived = asyncio.Event()
    host = SSHHost(remote.target, remote.options, on_event=lambda e: events.append((time.monotonic(), e)))
    await host.connect()
    await host.run(f": > {log}")
    follower = LogFollower(host, str(log))

    async def follow() -> None:
        async for batch in follower.batches():
            got.extend(batch)
            arrived.set()

    async def wait_lines(n: int, timeout: float = 15) -> None:
        async with asyncio.timeout(timeout):
            while len(got) < n:
                arrived.clear()
                await arrived.wait()

    task = asyncio.create_task(follow())
    expected: list[str] = []
    reconnects: list[float] = []
    counts: list[int] = []
    try:
        await eventually(lambda: tails(remote), until=lambda now: len(now) == 1, timeout=15, what="first tail")
        for cycle in range(CYCLES):
            before = tails(remote)
            remote.sshd.stop()
            if cycle % 2:
                # Written while sshd is down: must arrive after the reconnect, once. (Only on odd cycles:
                # the old tail dies of SIGPIPE when it writes, and even cycles must show the reaper at work.)
                line = f"cycle {cycle} while down " + "x" * cycle
                with log.open("a") as out:
                    out.write(line + "\n")
                expected.append(line)
            restarted = time.monotonic()
            remote.sshd.start()
            await eventually(functools.partial(_connected_since, events, restarted), timeout=15, what="reconnect")
            reconnects.append(next(t for t, e in events if isinstance(e, Connected) and t >= restarted) - restarted)
            # The old tail is reaped, a new one follows: exactly one, and not the old one.
            await eventually(
                lambda: tails(remote), until=functools.partial(_one_new_tail, before=before), timeout=15,
                what=f"cycle {cycle}: one new tail (old {before})",
            )  # fmt: skip
            counts.append(len(tails(remote)))
            after = f"cycle {cycle} after reconnect"
            await host.run(f"echo '{after}' >> {log}")
            expected.append(after)
            await wait_lines(len(expected))
        assert host.generation == CYCLES + 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await host.close()
        log.unlink(missing_ok=True)
    assert got == expected, "a line was lost or repeated across the restarts"
    assert counts == [1] * CYCLES
    assert not tails(remote)  # closing the host stops the last one too
    assert max(reconnects) < remote.options.backoff_max + 3.0, reconnects
    timing(
        f"sshd kill+restart x{CYCLES}: reconnect after restart median {sorted(reconnects)[CYCLES // 2]:.2f} s, "
        f"max {max(reconnects):.2f} s; remote tails after each cycle {counts}; {len(got)} lines, none lost"
    )
