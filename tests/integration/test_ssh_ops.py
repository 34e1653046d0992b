"""`SSHHost` against a real sshd: run, stream, forward, the session cap, logging."""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import sys
import time
from asyncio.subprocess import PIPE
from pathlib import Path

import httpx
import pytest

from specdash.paths import log_dir
from specdash.remote.host import Host
from specdash.remote.ssh import SSHHost, SSHOptions
from specdash.remote.ssherror import SSHError, SSHErrorKind
from tests.integration.conftest import remote_alive, target
from tests.support.eventually import eventually
from tests.support.sshd import TEST_USER, Sshd


def test_sshhost_satisfies_the_host_protocol() -> None:
    satisfied: Host = SSHHost("specdash-test@127.0.0.1:22")  # checked by mypy; constructing needs no network
    assert satisfied.name == "specdash-test@127.0.0.1:22"


async def test_run_returns_status_and_both_streams(host: SSHHost) -> None:
    result = await host.run("echo out; echo err >&2; whoami; exit 3")
    assert (result.exit_status, result.stdout, result.stderr) == (3, f"out\n{TEST_USER}\n", "err\n")
    assert not result.ok
    assert (await host.run("tr a-z A-Z", stdin="piped\n")).stdout == "PIPED\n"
    # Empty input is input too: the command reads EOF at once instead of waiting out the timeout.
    assert (await host.run("wc -c", stdin="", timeout=10)).stdout.strip() == "0"


async def test_run_timeout_is_a_typed_error(host: SSHHost) -> None:
    started = time.monotonic()
    with pytest.raises(SSHError) as caught:
        await host.run("sleep 5", timeout=0.3)
    assert caught.value.kind is SSHErrorKind.COMMAND_TIMEOUT
    assert "sleep 5" in caught.value.message
    assert time.monotonic() - started < 2
    assert (await host.run("echo still usable")).ok


async def _remote_tmpdir(host: SSHHost) -> Path:
    return Path((await host.run("mktemp -d")).stdout.strip())


async def test_stream_delivers_appended_lines_within_100ms(host: SSHHost) -> None:
    path = await _remote_tmpdir(host) / "server.log"
    path.write_text("old 1\nold 2\n")  # same machine: the test writes what the remote tail reads
    arrived: asyncio.Queue[tuple[str, float]] = asyncio.Queue()

    async def consume() -> None:
        async for line in host.stream(f"exec tail -n +1 -F {path}"):
            await arrived.put((line, time.perf_counter()))

    consumer = asyncio.create_task(consume())
    try:
        assert [(await asyncio.wait_for(arrived.get(), 5))[0] for _ in range(2)] == ["old 1", "old 2"]
        latencies = []
        for i in range(5):
            with path.open("a") as log:
                log.write(f"new {i}\n")
                sent = time.perf_counter()
            line, at = await asyncio.wait_for(arrived.get(), 2)
            assert line == f"new {i}"
            latencies.append(at - sent)
        median = statistics.median(latencies)
        print(f"append-to-receipt latency: median {median * 1e3:.1f} ms, max {max(latencies) * 1e3:.1f} ms")
        assert median < 0.1
    finally:
        consumer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await consumer


async def test_stream_splits_on_cr_and_lf(host: SSHHost) -> None:
    lines = [line async for line in host.stream(r"printf 'a\rb\r\nc\nprogress 1%%\rprogress 2%%\rtail'")]
    assert lines == ["a", "b", "c", "progress 1%", "progress 2%", "tail"]


async def _pid_gone(host: SSHHost, pid: int, within: float = 15.0) -> None:
    """The reaper runs in the background: poll the remote process."""
    await eventually(
        lambda: remote_alive(host, pid), until=lambda alive: not alive, timeout=within,
        what=f"remote pid {pid} gone (alive)",
    )  # fmt: skip


async def test_closing_a_stream_stops_the_remote_process(host: SSHHost) -> None:
    lines = host.stream("echo $$; exec sleep 300")
    pid = int(await anext(lines))
    assert await remote_alive(host, pid)
    await lines.aclose()  # type: ignore[attr-defined]
    await _pid_gone(host, pid)
    # The pidfile is removed by a background cleanup just after: wait for it with a deadline.
    pidfile = f"~/.specdash/procs/{host.client_id}/1.{pid}"
    await eventually(
        lambda: host.run(f"test -e {pidfile}"), until=lambda r: not r.ok, timeout=15, what=f"pidfile {pidfile} removed"
    )


async def test_forward_reaches_an_http_server_on_the_host(host: SSHHost) -> None:
    site = await _remote_tmpdir(host)
    (site / "hello.txt").write_text("hello through the tunnel\n")
    server = host.stream(f"exec /usr/bin/python3 -u -m http.server --bind 127.0.0.1 --directory {site} 0")
    try:
        banner = await asyncio.wait_for(anext(server), 10)  # "Serving HTTP on 127.0.0.1 port N (...) ..."
        remote_port = int(banner.split(" port ")[1].split()[0])
        local_port = await host.forward(remote_port)
        assert local_port != remote_port
        async with httpx.AsyncClient(timeout=5, trust_env=False) as client:
            replies = await asyncio.gather(
                *(client.get(f"http://127.0.0.1:{local_port}/hello.txt") for _ in range(12))
            )  # more than MaxSessions: forwarded channels do not count
        assert {reply.status_code for reply in replies} == {200}
        assert replies[0].text == "hello through the tunnel\n"
    finally:
        await server.aclose()  # type: ignore[attr-defined]


async def test_more_concurrent_commands_than_max_sessions(host: SSHHost) -> None:
    results = await asyncio.gather(*(host.run(f"sleep 0.2; echo {i}") for i in range(20)))
    assert [result.stdout for result in results] == [f"{i}\n" for i in range(20)]


async def test_without_the_cap_sshd_refuses_sessions(sshd: Sshd, ssh_options: SSHOptions) -> None:
    # The counter-test: proves the 20-command test above would fail without the semaphore. The commands outlast
    # the open retries (0.75 s in all), so the refusals are not retried away.
    options = SSHOptions(**{**ssh_options.__dict__, "max_sessions": 20})
    async with SSHHost(target(sshd), options) as host:
        results = await asyncio.gather(*(host.run(f"sleep 2; echo {i}") for i in range(20)), return_exceptions=True)
    errors = [result for result in results if isinstance(result, SSHError)]
    assert errors, "sshd (MaxSessions 10) accepted 20 concurrent sessions"
    assert all(error.kind is SSHErrorKind.CHANNEL for error in errors)
    assert "MaxSessions" in errors[0].message


async def test_asyncssh_logs_to_the_state_dir_not_the_terminal(
    host: SSHHost, capfd: pytest.CaptureFixture[str]
) -> None:
    await host.run("true")
    assert host.log_file == log_dir() / "ssh.log"
    assert "Opening SSH connection" in host.log_file.read_text()
    captured = capfd.readouterr()
    assert "asyncssh" not in captured.err and "SSH" not in captured.err


async def test_a_slow_reader_of_a_fast_stream_holds_a_bounded_buffer(sshd: Sshd, ssh_options: SSHOptions) -> None:
    """A command that writes faster than we read: the SSH channel's window must push back on the host, so
    what waits in our process stays within a few windows (2 MiB each), whatever the command writes.

    asyncssh re-opens a channel's whole window when it delivers the first of several buffered packets and
    keeps the rest: a reader that takes less than everything buffered let the buffer grow without bound
    (112 MB in a log flood under a CPU hog). The stream runs in a fresh process (`tests.support.stream_memory`
    says why): in a worker with a hundred tests behind it the same stream measured 17.9 MB (ci28), 14 MB alone."""
    total = 48 * 1024 * 1024
    assert ssh_options.known_hosts is not None and ssh_options.ssh_config is not None
    argv = [target(sshd), str(ssh_options.identity_files[0]), str(ssh_options.known_hosts)]
    argv += [str(ssh_options.ssh_config), str(total)]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.support.stream_memory", *argv, stdout=PIPE, stderr=PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode == 0, err.decode()
    measured = json.loads(out)
    peak = measured["peak_added"]
    assert measured["got"] == total
    assert peak < 16 * 1024 * 1024, f"peak {peak / 1e6:.1f} MB while streaming {total / 1e6:.0f} MB"
