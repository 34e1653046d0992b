"""A host reachable only through a jump host (two namespaces: root -> jump -> target), with faults on each hop."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from specdash.remote.events import Connected, ConnectionEvent, Lost, Reconnecting
from specdash.remote.ssh import SSHHost, SSHOptions
from tests.reliability.conftest import RemoteHost, timing
from tests.support.sshd import TEST_USER, Keys

pytestmark = pytest.mark.netns


class Events:
    """The host's events with arrival times; waits are woken by each new event (no polling)."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, ConnectionEvent]] = []
        self._arrived = asyncio.Event()

    def __call__(self, event: ConnectionEvent) -> None:
        self.seen.append((time.monotonic(), event))
        self._arrived.set()

    def find(self, kind: type, since: float, *, with_error: bool = False) -> tuple[float, ConnectionEvent] | None:
        for t, event in self.seen:
            if isinstance(event, kind) and t >= since and (not with_error or getattr(event, "last_error", None)):
                return t, event
        return None

    async def wait(self, kind: type, since: float, timeout: float, *, with_error: bool = False) -> float:
        async with asyncio.timeout(timeout):
            while (found := self.find(kind, since, with_error=with_error)) is None:
                self._arrived.clear()
                await self._arrived.wait()
        return found[0]


async def test_through_a_jump_host_cuts_and_a_dead_jump_host_are_survived(
    remote: RemoteHost, ssh_keys: Keys, tmp_path: Path
) -> None:
    """Nothing lost: the target is reached only through the jump host (its SSH client address is the jump
    host's); a cut of the inner link and a dead jump sshd are each noticed, reported with the jump host
    named, and healed by a reconnect through the jump host, after which commands run on the target again."""
    jump_ns = remote.ns
    target_ns = jump_ns.behind()
    target_ns.start_sshd(ssh_keys, name="target-sshd")
    key = " ".join(ssh_keys.host_pub.split()[:2])
    kh = tmp_path / "jump_known_hosts"
    kh.write_text(f"{jump_ns.addr} {key}\n{target_ns.addr} {key}\n")
    jump = f"{TEST_USER}@{jump_ns.addr}:22"
    options = SSHOptions(**{**remote.options.__dict__, "known_hosts": kh, "jump": jump})
    events = Events()
    host = SSHHost(f"{TEST_USER}@{target_ns.addr}:22", options, on_event=events)
    await host.connect()
    try:
        client_ip, _, server_ip, _ = (await host.run("echo $SSH_CONNECTION")).stdout.split()
        assert (client_ip, server_ip) == (target_ns.local_addr, target_ns.addr)  # via the jump host's link

        # 1. The inner link (jump <-> target) is cut for 5 s; the root <-> jump link stays up.
        cut = target_ns.cut()
        lost_inner = await events.wait(Lost, cut, 15)
        await asyncio.sleep(max(0.0, cut + 5.0 - time.monotonic()))  # the outage's length, not a sync
        healed = target_ns.heal()
        back_inner = await events.wait(Connected, healed, 30)
        assert (await host.run("echo again")).stdout == "again\n"

        # 2. The jump host's sshd dies: the tunnel goes with it; reconnects fail naming the jump host.
        jump_sshd = remote.sshd
        killed = time.monotonic()
        jump_sshd.stop()
        await events.wait(Lost, killed, 15)
        await events.wait(Reconnecting, killed, 15, with_error=True)
        found = events.find(Reconnecting, killed, with_error=True)
        assert found is not None
        failing = found[1]
        assert isinstance(failing, Reconnecting) and failing.last_error is not None
        assert f"jump host {jump}" in failing.last_error, failing.last_error
        restarted = time.monotonic()
        jump_sshd.start()
        back_jump = await events.wait(Connected, restarted, 30)
        assert (await host.run("echo $SSH_CONNECTION")).stdout.split()[2] == target_ns.addr
        assert host.generation == 3
    finally:
        await host.close()
    timing(
        f"jump host: inner-link cut noticed after {lost_inner - cut:.2f} s, reconnected {back_inner - healed:.2f} s "
        f"after heal; dead jump sshd reported as '{failing.last_error[:60]}...', reconnected "
        f"{back_jump - restarted:.2f} s after its restart"
    )
