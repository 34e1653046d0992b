"""The supervisor: loss, back-off, reconnect, keepalive, reaping leftovers. Each test owns its sshd."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from specdash.remote.events import Connected, ConnectionEvent, ConnectionState, Failed, Lost, Reconnecting
from specdash.remote.ssh import SSHHost, SSHOptions
from specdash.remote.ssherror import SSHError, SSHErrorKind
from tests.integration.conftest import remote_alive, target, trust
from tests.support.eventually import eventually
from tests.support.sshd import Keys, Sshd, keygen, make_dir


async def _next(queue: asyncio.Queue[ConnectionEvent], kind: type, timeout: float = 10.0) -> ConnectionEvent:
    """The next event of `kind`, skipping others; fails after `timeout`."""
    async with asyncio.timeout(timeout):
        while True:
            event = await queue.get()
            if isinstance(event, kind):
                return event


async def test_reconnects_after_sshd_restart_and_reaps_leftovers(
    make_sshd: Callable[..., Sshd], ssh_options: SSHOptions, known_hosts: Path
) -> None:
    server = make_sshd("restart")
    trust(known_hosts, server)
    host = SSHHost(target(server), ssh_options)
    events = host.subscribe()
    await host.connect()
    try:
        # A streamed command that will outlive the connection (we kill only sshd's processes).
        leftover = host.stream("echo $$; exec sleep 300")
        pid = int(await anext(leftover))
        # A forward made before the loss (to the sshd port itself).
        forwarded = await host.forward(server.port)
        # And a run() in flight when the connection drops.
        marker = (await host.run("mktemp -u")).stdout.strip()
        in_flight = asyncio.create_task(host.run(f"touch {marker}; exec sleep 30"))
        await eventually(  # the command has started
            lambda: host.run(f"test -e {marker}"), until=lambda r: r.ok, timeout=15, what=f"{marker} created"
        )

        server.stop()
        with pytest.raises(SSHError) as dropped:
            await asyncio.wait_for(in_flight, 5)
        assert dropped.value.kind is SSHErrorKind.LOST and "sleep 30" in dropped.value.message
        lost = await _next(events, Lost)
        assert host.state is not ConnectionState.CONNECTED
        assert isinstance(lost, Lost) and lost.reason
        with pytest.raises(SSHError) as caught:  # a stream on the dead connection reports LOST
            await anext(leftover)
        assert caught.value.kind is SSHErrorKind.LOST
        with pytest.raises(SSHError) as outage:  # run() waits for the reconnect up to its timeout
            await host.run("true", timeout=0.2)
        assert outage.value.kind is SSHErrorKind.LOST
        retry = await _next(events, Reconnecting)
        assert isinstance(retry, Reconnecting) and retry.delay > 0
        with pytest.raises(ConnectionRefusedError):  # while down, the forward's port refuses at once
            await asyncio.open_connection("127.0.0.1", forwarded)

        server.start()
        connected = await _next(events, Connected)
        assert isinstance(connected, Connected) and connected.generation == 2
        await host.wait_connected(timeout=1)
        assert (await host.run("echo back")).stdout == "back\n"
        # The forward's local port works again over the new connection, without forwarding again.
        reader, writer = await asyncio.open_connection("127.0.0.1", forwarded)
        assert (await asyncio.wait_for(reader.readline(), 5)).startswith(b"SSH-2.0-OpenSSH")
        writer.close()
        assert await host.forward(server.port) == forwarded

        # The supervisor reaps generation-1 leftovers in the background after reconnecting.
        await eventually(
            lambda: remote_alive(host, pid), until=lambda alive: not alive, timeout=15,
            what=f"leftover {pid} reaped (alive)",
        )  # fmt: skip
        assert await host.reap_stale() == []
    finally:
        await host.close()
    assert host.state is ConnectionState.CLOSED


async def test_keepalive_notices_an_unresponsive_server(
    make_sshd: Callable[..., Sshd], ssh_options: SSHOptions, known_hosts: Path
) -> None:
    server = make_sshd("frozen")
    trust(known_hosts, server)
    options = SSHOptions(
        **{**ssh_options.__dict__, "keepalive_interval": 0.2, "keepalive_count_max": 2, "backoff_initial": 5.0}
    )
    host = SSHHost(target(server), options)
    events = host.subscribe()
    await host.connect()
    # A command round trip first: sshd forks the user's session process after authentication, and a freeze
    # that lands before that fork misses the process that then answers the keepalives.
    await host.run("true")
    frozen = server.signal_sessions(signal.SIGSTOP)  # TCP stays up, nothing answers
    try:
        assert frozen
        started = time.monotonic()
        lost = await _next(events, Lost, timeout=5)
        assert isinstance(lost, Lost) and "keepalive" in lost.reason.lower()
        assert time.monotonic() - started < 3
    finally:
        server.signal_sessions(signal.SIGCONT)
        await host.close()


async def test_permanent_error_on_reconnect_fails_with_reason(
    ssh_keys: Keys, ssh_options: SSHOptions, known_hosts: Path
) -> None:
    directory = make_dir("specdash-rekeyed-")
    server = Sshd(ssh_keys.with_own_host_key(directory), name="rekeyed").start()
    trust(known_hosts, server)
    seen: list[ConnectionEvent] = []
    host = SSHHost(target(server), ssh_options, on_event=seen.append)
    events = host.subscribe()
    await host.connect()
    try:
        # The server comes back with another host key: retrying cannot help, so the supervisor gives up.
        server.stop()
        await _next(events, Lost)
        server.keys.host_key.unlink()
        server.keys.host_key.with_suffix(".pub").unlink()
        keygen(server.keys.host_key, "reinstalled")
        server.start()
        failed = await _next(events, Failed)
        assert isinstance(failed, Failed) and failed.error.kind is SSHErrorKind.HOST_KEY_CHANGED
        assert host.state is ConnectionState.FAILED and host.failure is failed.error
        with pytest.raises(SSHError) as caught:
            await host.wait_connected(timeout=1)
        assert caught.value.kind is SSHErrorKind.HOST_KEY_CHANGED
        assert [type(e).__name__ for e in seen][:3] == ["Connecting", "Connected", "Lost"]
    finally:
        with contextlib.suppress(SSHError):
            await host.close()
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)


async def test_a_detached_command_is_spared_by_the_reap_after_a_reconnect_and_reaped_by_close(
    sshd: Sshd, ssh_options: SSHOptions
) -> None:
    """The probe agent's kind of process: started detached (no channel), it survives what a reconnect reaps
    (the streams of older connections) and is found again by its tag; closing the host stops it."""
    async with SSHHost(target(sshd), ssh_options) as host:
        pid = await host.start_detached("exec sleep 300", ".specdash/detached-test.log")
        streamed = host.stream("echo $$; exec sleep 300")
        stream_pid = int(await anext(streamed))
        assert await remote_alive(host, pid)
        assert await host._reap(keep_generation=host.generation + 1) == [stream_pid]  # an older generation's
        assert await remote_alive(host, pid)  # the detached one was spared
        await streamed.aclose()  # type: ignore[attr-defined]

    # close() reaped it (the "host" is this machine: look at /proc directly).
    def running(pid: int) -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
        except OSError:
            return False

    deadline = time.monotonic() + 10
    while running(pid):
        assert time.monotonic() < deadline, f"detached {pid} outlived close()"
        await asyncio.sleep(0.05)
