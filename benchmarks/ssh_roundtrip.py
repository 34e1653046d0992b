"""Connect time and per-command round trip: one `SSHHost` connection vs a fresh `ssh` CLI per command.

Usage:
    .venv/bin/python benchmarks/ssh_roundtrip.py                 # starts a loopback sshd (root; tests/support/sshd.py)
    .venv/bin/python benchmarks/ssh_roundtrip.py --target user@host:port --key KEY --known-hosts FILE
    ... --append benchmarks/RESULTS.md                           # also append the table with machine and date

Without `--target` it starts sshd on 127.0.0.1 as in the integration tests and logs in as the clean
test user (root's pyenv `.bashrc` would add 130+ ms per command, see reference/environment.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import asyncssh  # noqa: E402

from specdash.remote.ssh import SSHHost, SSHOptions  # noqa: E402


@dataclass(frozen=True)
class Endpoint:
    """Where to measure."""

    target: str
    """`user@host:port`."""
    key: Path
    """Client private key."""
    known_hosts: Path
    """known_hosts file trusting the server."""
    port: int
    """Port (for the ssh CLI)."""


@contextmanager
def loopback_sshd() -> Iterator[Endpoint]:
    """A throwaway sshd on 127.0.0.1 with the test user (the integration tests' machinery)."""
    from tests.support.sshd import TEST_USER, Keys, Sshd, ensure_test_user, make_dir, skip_reason

    reason = skip_reason()
    if reason:
        raise SystemExit(f"cannot start a loopback sshd: {reason}; pass --target/--key/--known-hosts")
    ensure_test_user()
    directory = make_dir("specdash-bench-")
    server = Sshd(Keys.create(directory), name="bench").start()
    known_hosts = directory / "known_hosts"
    known_hosts.write_text(server.known_hosts_line() + "\n")
    try:
        yield Endpoint(f"{TEST_USER}@127.0.0.1:{server.port}", server.keys.client_key, known_hosts, server.port)
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)


def _ms(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"{statistics.median(values) * 1e3:8.2f} | {p95 * 1e3:8.2f}"


async def measure_raw(endpoint: Endpoint, runs: int) -> list[float]:
    """Bare asyncssh `conn.run("true")`, to show what SSHHost adds (semaphore, state checks, timeout)."""
    user, _, rest = endpoint.target.partition("@")
    async with asyncssh.connect(
        rest.rsplit(":", 1)[0],
        endpoint.port,
        username=user,
        client_keys=[str(endpoint.key)],
        known_hosts=str(endpoint.known_hosts),
        agent_path=None,
        config=None,
    ) as conn:
        await conn.run("true")
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            await conn.run("true")
            times.append(time.perf_counter() - started)
    return times


async def measure_asyncssh(endpoint: Endpoint, connects: int, runs: int) -> tuple[list[float], list[float]]:
    """Fresh connect times, and `run("true")` round trips on one connection."""
    options = SSHOptions(identity_files=(endpoint.key,), known_hosts=endpoint.known_hosts, use_agent=False)
    connect_times = []
    for _ in range(connects):
        started = time.perf_counter()
        host = SSHHost(endpoint.target, options)
        await host.connect()
        connect_times.append(time.perf_counter() - started)
        await host.close()
    async with SSHHost(endpoint.target, options) as host:
        await host.run("true")  # warm-up: first channel
        run_times = []
        for _ in range(runs):
            started = time.perf_counter()
            result = await host.run("true")
            run_times.append(time.perf_counter() - started)
            assert result.ok
    return connect_times, run_times


def measure_cli(endpoint: Endpoint, runs: int, extra: list[str]) -> list[float]:
    """A fresh `ssh` process (connect, auth, run, exit) per command."""
    user_host = endpoint.target.rsplit(":", 1)[0]
    command = [
        "ssh", "-p", str(endpoint.port), "-i", str(endpoint.key), "-o", f"UserKnownHostsFile={endpoint.known_hosts}",
        "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-F", "/dev/null",
        *extra, user_host, "true",
    ]  # fmt: skip
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, check=True, stdin=subprocess.DEVNULL, capture_output=True)
        times.append(time.perf_counter() - started)
    return times


def machine() -> str:
    """One line describing the machine and its load."""
    cpu = "unknown CPU"
    with open("/proc/cpuinfo") as info:
        for line in info:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    ssh_version = subprocess.run(["ssh", "-V"], capture_output=True, text=True).stderr.strip()
    return (
        f"{platform.node()}: {cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, {ssh_version}; load average {load}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--target", help="user@host:port (default: start a loopback sshd)")
    parser.add_argument("--key", type=Path, help="client private key")
    parser.add_argument("--known-hosts", type=Path, help="known_hosts trusting the server")
    parser.add_argument("--runs", type=int, default=100, help="run('true') calls on one connection")
    parser.add_argument("--connects", type=int, default=10, help="fresh asyncssh connects")
    parser.add_argument("--cli-runs", type=int, default=20, help="ssh CLI invocations")
    parser.add_argument("--append", type=Path, help="append the results to this markdown file")
    args = parser.parse_args()

    with loopback_sshd() if args.target is None else _given(args) as endpoint:
        connect_times, run_times = asyncio.run(measure_asyncssh(endpoint, args.connects, args.runs))
        raw_times = asyncio.run(measure_raw(endpoint, args.runs))
        cli = measure_cli(endpoint, args.cli_runs, [])
        cli_classic = measure_cli(endpoint, args.cli_runs, ["-o", "KexAlgorithms=curve25519-sha256"])

    ratio = statistics.median(cli) / statistics.median(run_times)
    table = "\n".join(
        [
            "| what | n | median ms | p95 ms |",
            "|---|---:|---:|---:|",
            f"| SSHHost connect (fresh, incl. auth) | {len(connect_times)} | {_ms(connect_times)} |",
            f'| SSHHost `run("true")`, one connection | {len(run_times)} | {_ms(run_times)} |',
            f'| bare asyncssh `conn.run("true")`, same | {len(raw_times)} | {_ms(raw_times)} |',
            f"| `ssh host true`, fresh CLI per command | {len(cli)} | {_ms(cli)} |",
            f"| same, `-o KexAlgorithms=curve25519-sha256` | {len(cli_classic)} | {_ms(cli_classic)} |",
        ]
    )
    print(table)
    print(f"\nOne connection is {ratio:.0f}x faster per command than a fresh ssh CLI.")
    if args.append:
        section = (
            f"\n## SSH round trip ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC)\n\n"
            f"`benchmarks/ssh_roundtrip.py`, loopback sshd, clean test user. Machine: {machine()}.\n\n"
            f"{table}\n\nOne `SSHHost` connection is about **{ratio:.0f}x** faster per command than a fresh `ssh`.\n"
        )
        if not args.append.exists():
            args.append.write_text("# Benchmark results\n\nFigures with date and machine; append, never rewrite.\n")
        with args.append.open("a") as out:
            out.write(section)


@contextmanager
def _given(args: argparse.Namespace) -> Iterator[Endpoint]:
    if args.key is None or args.known_hosts is None:
        raise SystemExit("--target needs --key and --known-hosts")
    port = int(args.target.rsplit(":", 1)[1]) if ":" in args.target else 22
    yield Endpoint(args.target, args.key, args.known_hosts, port)


if __name__ == "__main__":
    main()
