"""What an idle host costs in the fleet view, and whether 16 of them stay responsive on this machine.

Setup: a loopback sshd (the tests' machinery, `_remote.loopback_sshd`); N hosts on it, each its own
`RemoteSession` and SSH connection (its own state dir: no server runs), in `FleetApp` headless (`run_test`,
100x30, live timers as in the CLI). After every row says connected, measured over an idle window:

- memory: this process's RSS after the fleet settled, minus before the app was made (per host: / N);
- CPU: process CPU time over wall time in the window (per host: / N);
- SSH: TCP connections to the sshd (one per host), and the session channels open over all connections,
  sampled every 0.25 s (the long-lived ones are what an idle host holds);
- responsiveness: event-loop lag (how late a 10 ms sleep wakes) through the window, and the time from a key
  press (`down`, posted as the terminal driver does) to the end of the frame that shows the cursor moved.

Usage: `.venv/bin/python benchmarks/fleet_cost.py [--hosts 1 4 16] [--seconds 20]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

from textual import events

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._remote import bench_config, loopback_sshd  # noqa: E402
from specdash.bench.store import Store  # noqa: E402
from specdash.config import HostConfig  # noqa: E402
from specdash.remote.ssh import SSHHost, SSHOptions  # noqa: E402
from specdash.server.remote_session import RemoteSession  # noqa: E402
from specdash.ui.fleet import FleetApp  # noqa: E402
from tests.support.sshd import TEST_USER, Sshd  # noqa: E402


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def open_channels(sessions: list[RemoteSession]) -> int:
    """SSH session channels open now over all hosts: each holds one of its connection's session slots
    (`SSHHost`'s semaphore below MaxSessions; read from its private counter, for this measurement only)."""
    total = 0
    for s in sessions:
        sem = s.host._sessions  # noqa: SLF001
        total += s.host._options.max_sessions - sem._value  # noqa: SLF001
    return total


def connections(port: int) -> int:
    """Established TCP connections from this process's side to the sshd's port."""
    hexport = f"{port:04X}"
    n = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[2].endswith(":" + hexport) and fields[3] == "01":
            n += 1
    return n


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def measure(server: Sshd, options: SSHOptions, n: int, seconds: float, tmp: Path) -> dict[str, float]:
    cfg, _port = bench_config(tmp, 0.01)
    address = f"{TEST_USER}@{server.listen}:{server.port}"
    base = f"~/.specdash-bench/fleet-{uuid.uuid4().hex[:8]}"
    store = Store(tmp / f"results-{n}.db")
    before = rss_mib()
    sessions = [
        RemoteSession(
            SSHHost(address, options),
            HostConfig(name=f"h{i}", address=address, state_dir=f"{base}/{i}"),
            cfg,
            store=store,
        )
        for i in range(n)
    ]
    app = FleetApp(sessions, tick=1.0)
    out: dict[str, float] = {}
    async with app.run_test(size=(100, 30)) as pilot:
        deadline = time.monotonic() + 60
        while any(h.row.link != "connected" or h.row.status is None for h in app.hosts):
            if time.monotonic() > deadline:
                raise TimeoutError([h.row.link for h in app.hosts])
            await asyncio.sleep(0.1)
        await asyncio.sleep(2.0)  # the first GPU probe and attach commands finish
        lags: list[float] = []
        channels: list[int] = []
        stop = asyncio.Event()

        async def lag_probe() -> None:
            while not stop.is_set():
                t = time.perf_counter()
                await asyncio.sleep(0.01)
                lags.append(time.perf_counter() - t - 0.01)

        async def channel_probe() -> None:
            while not stop.is_set():
                channels.append(open_channels(sessions))
                await asyncio.sleep(0.25)

        cpu0, wall0 = time.process_time(), time.perf_counter()
        probes = [asyncio.create_task(lag_probe()), asyncio.create_task(channel_probe())]
        keys: list[float] = []
        going = 1
        table = app.fleet.query_one("#fleet-table")
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            await asyncio.sleep(1.0)
            row = table.cursor_row  # type: ignore[attr-defined]
            t = time.perf_counter()
            going = -1 if row == n - 1 else 1 if row == 0 else going  # down the rows, then back up
            key = "down" if going > 0 else "up"
            app.post_message(events.Key(key, None))
            while table.cursor_row == row and n > 1:  # type: ignore[attr-defined]  # noqa: ASYNC110 - timing a frame
                await asyncio.sleep(0.001)
            await pilot.pause()
            keys.append(time.perf_counter() - t)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        stop.set()
        await asyncio.gather(*probes)
        out = {
            "hosts": n,
            "rss_mib": rss_mib() - before,
            "cpu_pct": 100 * cpu / wall,
            "tcp": connections(server.port),
            "channels_mean": statistics.mean(channels),
            "channels_max": max(channels),
            "lag_p99_ms": 1000 * pct(lags, 0.99),
            "lag_max_ms": 1000 * max(lags),
            "key_p50_ms": 1000 * statistics.median(keys),
            "key_max_ms": 1000 * max(keys),
        }
        await pilot.press("q")
    store.close()
    return out


async def main(hosts: list[int], seconds: float) -> None:
    import tempfile

    with loopback_sshd() as (server, options), tempfile.TemporaryDirectory() as tmp:
        rows = []
        for n in hosts:
            rows.append(await measure(server, options, n, seconds, Path(tmp)))
            print(rows[-1], flush=True)
    print(f"\nload average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} cores")
    print(
        "| hosts | RSS MiB (per host) | CPU % (per host) | TCP conns | SSH channels mean / max | "
        "loop lag p99 / max ms | key to frame p50 / max ms |"
    )
    print("|--:|--:|--:|--:|--:|--:|--:|")
    for r in rows:
        k = r["hosts"]
        print(
            f"| {k:.0f} | {r['rss_mib']:.1f} ({r['rss_mib'] / k:.2f}) | {r['cpu_pct']:.2f} ({r['cpu_pct'] / k:.3f}) | "
            f"{r['tcp']:.0f} | {r['channels_mean']:.2f} / {r['channels_max']:.0f} | "
            f"{r['lag_p99_ms']:.1f} / {r['lag_max_ms']:.1f} | {r['key_p50_ms']:.1f} / {r['key_max_ms']:.1f} |"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--seconds", type=float, default=20.0)
    ns = parser.parse_args()
    import faulthandler

    faulthandler.dump_traceback_later(float(os.environ.get("FLEET_COST_DUMP", "0")) or 1e9, exit=True)
    asyncio.run(main(ns.hosts, ns.seconds))
