"""The probe agent: runs one level's share of requests next to the server; a follower streams its records.

Two modes of the same zipapp, stdlib only, both refusing an `--expect` that is not their protocol version
(exit 2, one `refused` line on stdout saying both versions):

- **agent** (`--job FILE --plan JSON --records FILE [--alive FILE --link-wait S --metrics-every S]`), started
  detached by `HostRunner` (no channel attached: a link cut cannot stop it; on a Slurm host, inside a step of
  the server's job on its head node). Its first record says where it runs (`where`: host name, Slurm node,
  job and step). It runs `Probe.run_level` against
  the job's URL (the server on the host's loopback) and appends every record to `--records`, flushed: a sample
  (with its sequence number `n`), the ticks of the live chart, the server's gauges read every
  `--metrics-every` seconds (so no poll crosses the link either), then `done` (or `crash` with the traceback,
  exit 1).
  It ends by itself when the level is done, when SIGUSR1 or SIGTERM asks it to stop (in-flight requests
  finish, `done` still comes), or when the client's pings stopped longer than `--link-wait` (plus
  `PING_GRACE_S`): the mtime of `--alive`, which followers touch, says when the client was last there.
- **follower** (`--follow FILE --after N --pid P --alive FILE --log FILE`), streamed by the client over
  SSH: says `hello` (version, Python, the agent's PID, the host's clock), then copies the record file's
  lines after sample N (N = -1: all) to stdout and follows it until `done`/`crash`, or until the agent's PID
  is gone without either (`gone`, with the tail of the agent's log). Each newline on its stdin (the
  client's ping) touches `--alive`; stdin closed (the channel gone) ends it.

So the record file is the one source of what the client stores: after a reconnect the client follows it
again from the last sample it stored, and nothing is lost or stored twice.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import signal
import socket
import sys
import threading
import time
import traceback
import urllib.request
from typing import IO, Any
from urllib.parse import urlsplit

from specdash.bench.agent.wire import (
    PROTOCOL,
    dumps,
    job_from_dict,
    outcome_to_dict,
    plan_from_dict,
    sample_to_list,
)
from specdash.bench.gauges import read_gauges
from specdash.bench.probe import Probe, install_uvloop
from specdash.bench.samples import RequestSample
from specdash.limits import MAX_CONTROL_BODY_BYTES

TICK_BUCKET_NS = 10_000_000
"""Live credits are summed per 10 ms in a tick record."""


PING_GRACE_S = 5.0
"""Missed pings tolerated on top of `--link-wait` before the agent counts the client as gone."""
POLL_S = 0.25
"""How often a follower looks for new records (their latency, not their times: those are the host's). Each
look sends what came since in one write, so the client gets a few SSH packets a second, not one per record:
at C = 64 that was half of specdash's own CPU with the probe on the host. The live chart's ticks come at
this pace anyway (`LevelPlan.tick_s`)."""
LOG_TAIL = 4000
"""Characters of the agent's log a `gone` record carries."""


class _Records:
    """The record file: each line written whole and flushed (a follower never sees half a record for long)."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def send(self, line: str) -> None:
        self._stream.write(line + "\n")
        self._stream.flush()


class _Sink:
    """The probe's `Sink`: samples (numbered) and ticks to the record file."""

    def __init__(self, out: _Records) -> None:
        self._out = out
        self._seq = 0

    def sample(self, sample: RequestSample) -> None:
        self._out.send(dumps({"t": "s", "n": self._seq, "d": sample_to_list(sample)}))
        self._seq += 1

    def tick(self, arrivals: list[tuple[int, int]], inflight: int, now_ns: int) -> None:
        # The live chart needs a rate, not every chunk (the samples carry those): credits summed per
        # TICK_BUCKET_NS keep a tick's size bounded whatever the event rate.
        buckets: dict[int, int] = {}
        for t, n in arrivals:
            key = t - t % TICK_BUCKET_NS
            buckets[key] = buckets.get(key, 0) + n
        self._out.send(dumps({"t": "k", "a": sorted(buckets.items()), "i": inflight, "now": now_ns}))


def _client_gone_for(alive: str | None) -> float:
    """Seconds since a follower last touched `alive` (0 without one)."""
    if alive is None:
        return 0.0
    try:
        return time.time() - os.stat(alive).st_mtime
    except OSError:
        return float("inf")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is not followed (as the control plane's reads): it could lead off this host."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect)
"""The stdlib's HTTP client, with no proxy from the environment (the server is on this host) and no redirects."""


def _fetch(url: str, timeout_s: float) -> str | None:
    """Blocking GET of `url` (run in a thread): the body of a 200 within `MAX_CONTROL_BODY_BYTES` and `timeout_s`,
    else None."""
    deadline = time.monotonic() + timeout_s
    request = urllib.request.Request(url, headers={"User-Agent": "specdash-agent"})
    try:
        with _OPENER.open(request, timeout=timeout_s) as response:
            if response.status != 200:
                return None
            body = bytearray()
            while len(body) <= MAX_CONTROL_BODY_BYTES:
                if time.monotonic() > deadline:
                    return None
                block = response.read(1 << 16)
                if not block:
                    return body.decode("utf-8", "replace")
                body.extend(block)
            return None
    except (OSError, ValueError, http.client.HTTPException):  # refused, timed out, 404, garbage
        return None


async def _get_text(url: str, path: str, timeout_s: float) -> str | None:
    """GET `path` of the server at `url` (on this host) off the event loop, so the probe's streams are not held:
    the body of a 200, or None (a poll that fails is skipped)."""
    parts = urlsplit(url)
    base = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"  # never the URL's user:password
    loop = asyncio.get_running_loop()
    try:
        return await asyncio.wait_for(loop.run_in_executor(None, _fetch, base + path, timeout_s), timeout_s + 1.0)
    except asyncio.TimeoutError:
        return None


async def _poll_gauges(url: str, every_s: float, out: _Records) -> None:
    """Every `every_s`, the server's gauges (`gauges.POLL_NAMES`) as an `m` record; a poll that fails is skipped."""
    while True:
        await asyncio.sleep(every_s)
        text = await _get_text(url, "/metrics", min(5.0, max(1.0, every_s)))
        if text is not None:
            out.send(dumps({"t": "m", "m": read_gauges(text), "now": time.perf_counter_ns()}))


async def _run(job: dict[str, Any], args: argparse.Namespace, out: _Records) -> int:
    url, settings, prompts = job_from_dict(job)
    plan = plan_from_dict(json.loads(args.plan))
    loop = asyncio.get_running_loop()
    async with Probe(url, settings, prompts) as probe:
        for sig, why in ((signal.SIGUSR1, "stopped by the client"), (signal.SIGTERM, "agent terminated")):
            loop.add_signal_handler(sig, probe.stop, why)

        async def watch_client() -> None:
            while _client_gone_for(args.alive) <= args.link_wait + PING_GRACE_S:  # noqa: ASYNC110 - a file
                await asyncio.sleep(0.5)
            probe.stop(f"link to the client gone for more than {args.link_wait:g} s")

        helpers = [asyncio.create_task(watch_client())]
        if args.metrics_every > 0:
            helpers.append(asyncio.create_task(_poll_gauges(url, args.metrics_every, out)))
        try:
            outcome = await probe.run_level(plan, _Sink(out))
        finally:
            for helper in helpers:
                helper.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
        out.send(dumps({"t": "done", "o": outcome_to_dict(outcome)}))
    return 0


def _where() -> dict[str, Any]:
    """The agent's first record: where it runs (its host name; inside a Slurm step, the node, job and step that
    slurmstepd gave it), so the client can say where the load came from."""
    env = os.environ
    return {
        "t": "where",
        "host": socket.gethostname(),
        "node": env.get("SLURMD_NODENAME", ""),
        "job": env.get("SLURM_JOB_ID", ""),
        "step": env.get("SLURM_STEP_ID", ""),
    }


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie counts as gone: the host's PID 1 may reap it late)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _tail(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()[-LOG_TAIL:]
    except OSError:
        return ""


def _pings(alive: str, gone: threading.Event) -> None:
    """Touch `alive` at each line on stdin; set `gone` at its end (the channel closed)."""
    try:
        for _ in sys.stdin:
            try:
                os.utime(alive)
            except OSError:
                with open(alive, "a"):
                    pass
    finally:
        gone.set()


_TERMINAL = ('{"t":"done"', '{"t":"crash"')


def follow(args: argparse.Namespace) -> int:
    """The follower (see the module docstring)."""
    gone = threading.Event()
    threading.Thread(target=_pings, args=(args.alive, gone), name="pings", daemon=True).start()
    out = sys.stdout
    after = args.after
    with open(args.follow, "a"):  # the agent may not have opened it yet
        pass
    with open(args.alive, "a"):
        pass
    os.utime(args.alive)  # back: the agent's count of the client's absence starts again
    try:
        python = ".".join(map(str, sys.version_info[:3]))
        hello = {"t": "hello", "v": PROTOCOL, "py": python, "pid": args.pid, "now": time.perf_counter_ns()}
        out.write(dumps(hello) + "\n")
        out.flush()
        with open(args.follow, "rb") as f:
            pending = b""
            idle_checks = 0
            while not gone.is_set():
                chunk = f.read(1 << 16)
                if not chunk:
                    # Nothing new: the agent may still write (poll), or be gone without a word (say so,
                    # after one more read: its last lines may have landed after ours).
                    if not _alive(args.pid):
                        idle_checks += 1
                        if idle_checks > 1:
                            out.write(dumps({"t": "gone", "log": _tail(args.log)}) + "\n")
                            out.flush()
                            return 0
                    time.sleep(POLL_S)
                    continue
                idle_checks = 0
                *lines, pending = (pending + chunk).split(b"\n")
                for raw in lines:
                    line = raw.decode("utf-8", "replace")
                    if after >= 0:
                        # Resuming: drop what the client stored already (samples up to `after`) and the ticks
                        # between them (the live chart has moved on).
                        if line.startswith('{"t":"s"'):
                            if int(json.loads(line)["n"]) <= after:
                                continue
                            after = -1
                        elif not line.startswith(_TERMINAL):
                            continue
                    out.write(line + "\n")
                    if line.startswith(_TERMINAL):
                        out.flush()
                        return 0
                out.flush()
    except (BrokenPipeError, ValueError):  # stdout gone with the channel
        pass
    return 0


def main(argv: list[str] | None = None) -> int:
    """The agent's and the follower's entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="specdash-agent")
    parser.add_argument("--expect", required=True)
    parser.add_argument("--job")
    parser.add_argument("--plan")
    parser.add_argument("--records")
    parser.add_argument("--alive")
    parser.add_argument("--link-wait", type=float, default=600.0)
    parser.add_argument("--metrics-every", type=float, default=0.0)
    parser.add_argument("--follow")
    parser.add_argument("--after", type=int, default=-1)
    parser.add_argument("--pid", type=int, default=0)
    parser.add_argument("--log", default="")
    args = parser.parse_args(argv)
    if args.expect != PROTOCOL:
        msg = f"specdash agent {PROTOCOL} refuses a client expecting {args.expect}: versions differ"
        print(dumps({"t": "refused", "v": PROTOCOL, "why": msg}), flush=True)
        print(msg, file=sys.stderr)
        return 2
    if args.follow:
        return follow(args)
    if not (args.job and args.plan and args.records):
        parser.error("the agent needs --job, --plan and --records (or --follow)")
    status = 1
    os.makedirs(os.path.dirname(os.path.abspath(args.records)), exist_ok=True)
    with open(args.records, "a") as stream:
        records = _Records(stream)
        records.send(dumps(_where()))
        try:
            with open(args.job) as f:
                job = json.load(f)
            install_uvloop()  # when the host happens to have it (about half the CPU per event); stdlib otherwise
            status = asyncio.run(_run(job, args, records))
        except Exception:  # noqa: BLE001 - reported to the client, which fails the level with it
            tb = traceback.format_exc()
            records.send(dumps({"t": "crash", "tb": tb[-4000:]}))
            print(tb, file=sys.stderr)
    return status


def entry() -> Any:
    """`__main__` of the zipapp."""
    sys.exit(main())
