"""A host reachable only through a jump host (two namespaces: root -> jump -> target), with faults on each hop."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from specdash.remote.events import Connected, ConnectionEvent, Lost, Reconnecting
from specdash.remote.ssh import SSHHost, SSHOptions
from tests.reliability.conftest import RemoteHost, timing
from tests.sshd import TEST_USER, Keys

pytestmark = pytest.mark.netns


async def _until(events: list[tuple[float, ConnectionEvent]], kind: type, since: float, timeout: float) -> float:
    """Wait for an event of `kind` recorded after `since` (the list fills from the host's callback)."""
    async with asyncio.timeout(timeout):
        while True:
            for t, event in events:
                if isinstance(event, kind) and t >= since:
                    return t
            await asyncio.sleep(0.02)


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
    events: list[tuple[float, ConnectionEvent]] = []
    host = SSHHost(f"{TEST_USER}@{target_ns.addr}:22", options, on_event=lambda e: events.append((time.monotonic(), e)))
    await host.connect()
    try:
        client_ip, _, server_ip, _ = (await host.run("echo $SSH_CONNECTION")).stdout.split()
        assert (client_ip, server_ip) == (target_ns.local_addr, target_ns.addr)  # via the jump host's link

        # 1. The inner link (jump <-> target) is cut for 5 s; the root <-> jump link stays up.
        cut = target_ns.cut()
        lost_inner = await _until(events, Lost, cut, 15)
        await asyncio.sleep(max(0.0, cut + 5.0 - time.monotonic()))  # the outage's length, not a sync
        healed = target_ns.heal()
        back_inner = await _until(events, Connected, healed, 30)
        assert (await host.run("echo again")).stdout == "again\n"

        # 2. The jump host's sshd dies: the tunnel goes with it; reconnects fail naming the jump host.
        jump_sshd = remote.sshd
        killed = time.monotonic()
        jump_sshd.stop()
        await _until(events, Lost, killed, 15)
        await _until(events, Reconnecting, killed, 15)
        async with asyncio.timeout(15):
            while not any(isinstance(e, Reconnecting) and e.last_error and t >= killed for t, e in events):
                await asyncio.sleep(0.02)
        failing = next(e for t, e in events if isinstance(e, Reconnecting) and e.last_error and t >= killed)
        assert isinstance(failing, Reconnecting) and failing.last_error is not None
        assert f"jump host {jump}" in failing.last_error, failing.last_error
        restarted = time.monotonic()
        jump_sshd.start()
        back_jump = await _until(events, Connected, restarted, 30)
        assert (await host.run("echo $SSH_CONNECTION")).stdout.split()[2] == target_ns.addr
        assert host.generation == 3
    finally:
        await host.close()
    timing(
        f"jump host: inner-link cut noticed after {lost_inner - cut:.2f} s, reconnected {back_inner - healed:.2f} s "
        f"after heal; dead jump sshd reported as '{failing.last_error[:60]}...', reconnected "
        f"{back_jump - restarted:.2f} s after its restart"
    )
