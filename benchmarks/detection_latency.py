"""How fast specdash notices "ready" and "crashed", measured against the moment it happened on the host.

Run (as root, about 5 minutes):
    .venv/bin/python benchmarks/detection_latency.py --runs 20

The "host" is this machine (a loopback sshd), so its clock is ours. A thread polls the server's log file
every millisecond and stamps when the marker line first appears in it: `The server is fired up and ready
to roll!` for ready, `RuntimeError: The size of tensor a (160)` for the crash (12 concurrent requests
push the simulated dynamic-disable mode past batch 10). Latency = when the session's status changed
minus that stamp. Prints median and worst of each.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._remote import bench_config, loopback_sshd, session_on  # noqa: E402
from specdash.core.events import ServerStatus  # noqa: E402
from specdash.phases import Phase  # noqa: E402
from tests.support.remote_sim import overload  # noqa: E402

READY_MARK = b"The server is fired up and ready to roll!"
CRASH_MARK = b"RuntimeError: The size of tensor a (160)"


class FileWatch(threading.Thread):
    """Stamps the first time `mark` appears in `path` (polled every millisecond)."""

    def __init__(self, path: str, mark: bytes) -> None:
        super().__init__(daemon=True)
        self.path, self.mark = path, mark
        self.seen_at: float | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set() and self.seen_at is None:
            try:
                with open(self.path, "rb") as f:
                    if self.mark in f.read():
                        self.seen_at = time.time()
                        return
            except FileNotFoundError:
                pass
            time.sleep(0.001)


async def measure(server, options, cfg, mode: str, port: int) -> float:  # type: ignore[no-untyped-def]
    want = Phase.READY if mode == "eagle3" else Phase.CRASHED
    changed_at: list[float] = []

    def listen(event: object) -> None:
        if isinstance(event, ServerStatus) and event.phase is want and not changed_at:
            changed_at.append(time.time())

    async with session_on(server, options, cfg, None, listen) as session:
        await session.start(mode)
        record = session._record
        assert record is not None
        watch = FileWatch(record.log_path, READY_MARK if want is Phase.READY else CRASH_MARK)
        watch.start()
        if want is Phase.CRASHED:
            await session.wait_status([Phase.READY], timeout=120)
            load = asyncio.create_task(overload(port))
        await session.wait_status([want, Phase.CRASHED, Phase.EXITED], timeout=120)
        if want is Phase.CRASHED:
            await load
        watch.join(2)
        watch.stop.set()
        if session.server_live():
            await session.stop()
    if watch.seen_at is None or not changed_at:
        raise SystemExit(f"{mode}: marker or status change missing")
    return changed_at[0] - watch.seen_at


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--time-scale", type=float, default=0.01)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, loopback_sshd() as (server, options):
        cfg, port = bench_config(Path(tmp), args.time_scale, tp=2)
        for mode, label in (("eagle3", "ready"), ("crash", "crash")):
            values = [await measure(server, options, cfg, mode, port) for _ in range(args.runs)]
            ms = sorted(v * 1000 for v in values)
            print(
                f"{label}: n={len(ms)} median {statistics.median(ms):.0f} ms, worst {ms[-1]:.0f} ms, "
                f"best {ms[0]:.0f} ms"
            )


if __name__ == "__main__":
    asyncio.run(main())
