"""The probe agent: runs one level's share of requests next to the server and streams records back.

Run by `HostRunner` as `python3 specdash-agent-<hash>.pyz --job FILE --plan JSON --records FILE --expect V`
on the host, stdlib only. It

1. refuses to run when `--expect` is not its own protocol version (exit 2, one line saying both versions);
2. prints `hello` (its version, Python, PID, clock), then runs `Probe.run_level` against the job's URL (the
   server on the host's loopback);
3. for every finished request appends its record to `--records` (flushed) *before* handing it to stdout,
   so a record the client never got is still on the host;
4. ends by itself: when the level is done (`done`), when SIGUSR1 or SIGTERM asks it to stop (in-flight
   requests finish, `done` still comes), or when stdout is gone (the SSH channel closed): it then stops
   sending and exits once its in-flight requests ended, their records kept in the file;
5. on any exception prints `crash` with the traceback (and the traceback to stderr) and exits 1.

Stdout is written by a thread of its own: a stalled link fills the pipe and blocks that thread, never the
event loop that stamps the chunks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import signal
import sys
import threading
import time
import traceback
from typing import IO, Any

from specdash.bench.agent.wire import (
    PROTOCOL,
    dumps,
    job_from_dict,
    outcome_to_dict,
    plan_from_dict,
    sample_to_list,
)
from specdash.bench.probe import Probe, install_uvloop
from specdash.bench.samples import RequestSample

TICK_BUCKET_NS = 10_000_000
"""Live credits are summed per 10 ms in a tick record."""


class _Out:
    """Lines to stdout from a thread; `gone` once stdout is closed (the channel went away)."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._queue: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self.gone = threading.Event()
        self._thread = threading.Thread(target=self._run, name="agent-stdout", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (line := self._queue.get()) is not None:
            try:
                self._stream.write(line + "\n")
                if self._queue.empty():
                    self._stream.flush()
            except (OSError, ValueError):
                self.gone.set()
                return
        try:
            self._stream.flush()
        except (OSError, ValueError):
            self.gone.set()

    def send(self, line: str) -> None:
        if not self.gone.is_set():
            self._queue.put(line)

    def close(self, timeout: float = 5.0) -> None:
        self._queue.put(None)
        self._thread.join(timeout)


class _Sink:
    """The probe's `Sink`: each sample to the record file first, then to stdout."""

    def __init__(self, out: _Out, records: IO[str]) -> None:
        self._out = out
        self._records = records
        self._seq = 0

    def sample(self, sample: RequestSample) -> None:
        line = dumps({"t": "s", "n": self._seq, "d": sample_to_list(sample)})
        self._seq += 1
        self._records.write(line + "\n")
        self._records.flush()
        self._out.send(line)

    def tick(self, arrivals: list[tuple[int, int]], inflight: int, now_ns: int) -> None:
        # The live chart needs a rate, not every chunk (the samples carry those): credits summed per
        # TICK_BUCKET_NS keep a tick's size bounded whatever the event rate.
        buckets: dict[int, int] = {}
        for t, n in arrivals:
            key = t - t % TICK_BUCKET_NS
            buckets[key] = buckets.get(key, 0) + n
        self._out.send(dumps({"t": "k", "a": sorted(buckets.items()), "i": inflight, "now": now_ns}))


async def _run(job: dict[str, Any], plan_json: str, out: _Out, records: IO[str]) -> int:
    url, settings, prompts = job_from_dict(job)
    plan = plan_from_dict(json.loads(plan_json))
    loop = asyncio.get_running_loop()
    async with Probe(url, settings, prompts) as probe:
        for sig, why in ((signal.SIGUSR1, "stopped by the client"), (signal.SIGTERM, "agent terminated")):
            loop.add_signal_handler(sig, probe.stop, why)

        async def watch_stdout() -> None:
            while not out.gone.is_set():  # noqa: ASYNC110 - set by the writer thread
                await asyncio.sleep(0.5)
            probe.stop("link to the client gone")

        watcher = asyncio.create_task(watch_stdout())
        try:
            outcome = await probe.run_level(plan, _Sink(out, records))
        finally:
            watcher.cancel()
        line = dumps({"t": "done", "o": outcome_to_dict(outcome)})
        records.write(line + "\n")
        records.flush()
        out.send(line)
    return 0


def main(argv: list[str] | None = None) -> int:
    """The agent's entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="specdash-agent")
    parser.add_argument("--job", required=True)
    parser.add_argument("--plan", required=True)
    parser.add_argument("--records", required=True)
    parser.add_argument("--expect", required=True)
    args = parser.parse_args(argv)
    out = _Out(sys.stdout)
    if args.expect != PROTOCOL:
        msg = f"specdash agent {PROTOCOL} refuses a client expecting {args.expect}: versions differ"
        out.send(dumps({"t": "refused", "v": PROTOCOL, "why": msg}))
        out.close()
        print(msg, file=sys.stderr)
        return 2
    out.send(dumps({"t": "hello", "v": PROTOCOL, "py": ".".join(map(str, sys.version_info[:3])),
                    "pid": os.getpid(), "now": time.perf_counter_ns()}))  # fmt: skip
    status = 1
    try:
        with open(args.job) as f:
            job = json.load(f)
        os.makedirs(os.path.dirname(os.path.abspath(args.records)), exist_ok=True)
        with open(args.records, "a") as records:
            install_uvloop()  # when the host happens to have it (about half the CPU per event); stdlib otherwise
            status = asyncio.run(_run(job, args.plan, out, records))
    except Exception:  # noqa: BLE001 - reported to the client, which fails the level with it
        tb = traceback.format_exc()
        out.send(dumps({"t": "crash", "tb": tb[-4000:]}))
        print(tb, file=sys.stderr)
    out.close()
    return status


def entry() -> Any:
    """`__main__` of the zipapp."""
    sys.exit(main())
