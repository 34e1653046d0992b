"""Client CPU per SSE event: specdash's probe against a plain aiohttp client (reference/measurement.md §9, §12).

Setup: the fake SSE server (`specdash.bench.fake_server`, aiohttp + uvloop) in its own process, streaming
`/generate` at 1 token per chunk every `--interval` s; each client in its own fresh process, pinned to a
different core than the server when there are two or more. Each client first runs one unmeasured wave (64
requests: opens the connections, warms caches), then `--requests` requests at `--streams` concurrency;
CPU is `time.process_time()` over that measured window only (start-up excluded), divided by the content
events received.

Clients:
- `floor`: a bare asyncio protocol on uvloop that only counts `data:` bytes per read (no HTTP parsing,
  no SSE, no accounting): the event loop's and the kernel's cost per read, which no Python client beats;
- `plain`: `ClientSession(TCPConnector(limit=C))`, `async for line in resp.content`, counts `data:` lines
  (no parsing at all: a lower bound), default asyncio loop;
- `plain-uvloop`: the same on uvloop;
- `probe`: `specdash.bench.probe.Probe.run_level` on uvloop (what each probe worker process runs: SSE
  splitting, server token counts, per-chunk timing, watchdog, ticker, samples);
- `probe-pool`: the full path, `ProbePool` with one spawned worker plus the parent receiving samples and
  ticks over the pipe; CPU = worker CPU during the level + parent CPU during the level.

Usage: `.venv/bin/python benchmarks/probe_cost.py [--streams 64] [--interval 0.01] [--requests 192]`.
Every run is bounded (`--timeout` per client process).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import time
from typing import Any

CLIENTS = ("floor", "plain", "plain-uvloop", "probe", "probe-pool")


def _body(n: int) -> dict[str, Any]:
    return {
        "text": "hi",
        "sampling_params": {"max_new_tokens": n, "temperature": 0, "ignore_eos": True},
        "stream": True,
    }


async def _plain(url: str, streams: int, requests: int, n: int) -> tuple[int, float, float]:
    import aiohttp

    events = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=streams)) as session:

        async def wave(count: int) -> None:
            nonlocal events
            it = iter(range(count))

            async def slot() -> None:
                nonlocal events
                for _ in it:
                    async with session.post(url + "/generate", json=_body(n)) as resp:
                        async for line in resp.content:
                            if line.startswith(b"data: ") and line != b"data: [DONE]\n":
                                events += 1

            await asyncio.gather(*(slot() for _ in range(streams)))

        await wave(streams)
        events = 0
        cpu0, t0 = time.process_time(), time.perf_counter()
        await wave(requests)
        return events, time.process_time() - cpu0, time.perf_counter() - t0


async def _floor(url: str, streams: int, requests: int, n: int) -> tuple[int, float, float]:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    body = json.dumps(_body(n)).encode()
    req = (
        f"POST /generate HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    loop = asyncio.get_running_loop()
    events = 0

    class Counter(asyncio.Protocol):
        def __init__(self) -> None:
            self.transport: Any = None
            self.done: asyncio.Future[None] | None = None
            self.tail = b""

        def connection_made(self, transport: Any) -> None:
            self.transport = transport

        def data_received(self, data: bytes) -> None:
            nonlocal events
            events += data.count(b"data: {")
            self.tail = (self.tail + data)[-7:]
            if self.tail == b"\r\n0\r\n\r\n" and self.done is not None and not self.done.done():
                self.done.set_result(None)

    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    conns = [(await loop.create_connection(Counter, host, port))[1] for _ in range(streams)]

    async def wave(count: int) -> None:
        it = iter(range(count))

        async def slot(c: Counter) -> None:
            for _ in it:
                c.done = loop.create_future()
                c.transport.write(req)
                await c.done

        await asyncio.gather(*(slot(c) for c in conns))

    await wave(streams)
    events = 0
    cpu0, t0 = time.process_time(), time.perf_counter()
    await wave(requests)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    for c in conns:
        c.transport.close()
    return events, cpu, wall


async def _probe(url: str, streams: int, requests: int, n: int) -> tuple[int, float, float]:
    from specdash.bench.probe import LevelPlan, ListSink, Probe, ProbeSettings

    async with Probe(url, ProbeSettings(output_len=n), ("hi",)) as probe:
        await probe.run_level(LevelPlan(concurrency=streams, total_requests=streams), ListSink())
        sink = ListSink()
        cpu0, t0 = time.process_time(), time.perf_counter()
        await probe.run_level(LevelPlan(concurrency=streams, total_requests=requests), sink)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    bad = [s for s in sink.samples if not s.ok or s.output_tokens != n]
    if bad:
        raise SystemExit(f"probe: {len(bad)} bad samples, e.g. {bad[0]}")
    return sum(len(s.chunk_tokens) for s in sink.samples), cpu, wall


async def _probe_pool(url: str, streams: int, requests: int, n: int) -> tuple[int, float, float]:
    from specdash.bench.probe import LevelPlan, ProbeSettings
    from specdash.bench.workers import Message, ProbePool

    pool = ProbePool(url, ProbeSettings(output_len=n), ("hi",))
    events = 0

    def on_message(_wid: int, msg: Message) -> None:
        nonlocal events
        if msg[0] == "sample":
            events += len(msg[1].chunk_tokens)

    try:
        await pool.run_level([LevelPlan(concurrency=streams, total_requests=streams)], lambda w, m: None)
        cpu0, t0 = time.process_time(), time.perf_counter()
        outcomes = await pool.run_level([LevelPlan(concurrency=streams, total_requests=requests)], on_message)
        parent_cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    finally:
        await pool.close()
    out = outcomes[0]
    assert out is not None
    # The worker measures its own CPU share over the level (process_time / wall inside run_level).
    return events, parent_cpu + out.headroom.cpu_share * wall, wall


def parse_only_us(n: int = 128, repeats: int = 200) -> float:
    """CPU µs per event of the probe's own Python work per read (HTTP de-chunking, SSE split, accounting)."""
    from specdash.bench.http1 import _Response
    from specdash.bench.sse import Endpoint, StreamAccount

    def chunk(i: int) -> bytes:
        obj = {"text": "tok " * i, "output_ids": list(range(i)),
               "meta_info": {"id": "r", "finish_reason": None, "prompt_tokens": 7, "completion_tokens": i}}  # fmt: skip
        payload = b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"
        return b"%x\r\n" % len(payload) + payload + b"\r\n"

    chunks = [chunk(i) for i in range(1, n + 1)]
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    clock = time.perf_counter_ns
    cpu0 = time.process_time()
    for _ in range(repeats):
        resp = _Response(StreamAccount(Endpoint.GENERATE), lambda outcome, reusable: None)
        resp.feed(head, 0)
        for c in chunks:
            resp.feed(c, clock())
    return (time.process_time() - cpu0) / (repeats * n) * 1e6


def run_client(name: str, url: str, streams: int, requests: int, n: int) -> dict[str, Any]:
    """Run one client in this process and return its figures."""
    if name != "plain":
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    fn = {"floor": _floor, "plain": _plain, "plain-uvloop": _plain, "probe": _probe, "probe-pool": _probe_pool}[name]
    events, cpu, wall = asyncio.run(fn(url, streams, requests, n))
    return {
        "client": name,
        "events": events,
        "cpu_s": round(cpu, 3),
        "wall_s": round(wall, 3),
        "events_per_s": round(events / wall),
        "us_per_event": round(cpu / events * 1e6, 1) if events else None,
        "cpu_share": round(cpu / wall, 3),
    }


def _pin(pid: int, cpu: int) -> None:
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2:
        try:
            os.sched_setaffinity(pid, {cpu})
        except OSError:
            pass


def main() -> None:
    """Start the server, run each client in its own process, print a table and a RESULTS.md block."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--interval", type=float, default=0.01, help="seconds per chunk per stream")
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--requests", type=int, default=192, help="measured requests per client")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--timeout", type=float, default=120.0, help="limit per client process (s)")
    ap.add_argument("--client", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.client:
        _pin(0, 0)
        print(json.dumps(run_client(args.client, args.url, args.streams, args.requests, args.output_len)))
        return

    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "specdash.bench.fake_server",
            "--port",
            "0",
            "--k",
            "1",
            "--interval",
            str(args.interval),
        ],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        if not line.startswith("listening"):
            raise SystemExit(f"server did not start: {line!r}")
        url = f"http://127.0.0.1:{line.split()[1]}"
        _pin(server.pid, 1)
        results = []
        for rep in range(args.repeats):
            for name in args.clients.split(","):
                cmd = [sys.executable, __file__, "--client", name, "--url", url, "--streams", str(args.streams),
                       "--requests", str(args.requests), "--output-len", str(args.output_len)]  # fmt: skip
                out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
                if out.returncode != 0:
                    raise SystemExit(f"{name} failed: {out.stderr[-2000:]}")
                r = json.loads(out.stdout.strip().splitlines()[-1])
                r["repeat"] = rep
                results.append(r)
                print(json.dumps(r), flush=True)
    finally:
        server.terminate()
        server.wait(10)
    offered = args.streams / args.interval
    print()
    print(f"### probe_cost — {time.strftime('%Y-%m-%d')}, {platform.node()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}")  # fmt: skip
    print()
    print(
        f"{args.streams} streams, 1 token per chunk every {args.interval * 1000:g} ms "
        f"(≈{offered:.0f} events/s offered), {args.output_len} tokens per request, {args.requests} measured "
        f"requests per client, median of {args.repeats}; server and client on separate pinned cores; "
        "CPU over the measured window only."
    )
    print()
    print("| client | CPU µs per event | events/s | client CPU share |")
    print("|---|---|---|---|")
    for name in args.clients.split(","):
        rs = sorted((r for r in results if r["client"] == name), key=lambda r: r["us_per_event"])
        mid = rs[len(rs) // 2]
        span = f" ({rs[0]['us_per_event']}–{rs[-1]['us_per_event']})" if len(rs) > 1 else ""
        print(f"| {name} | {mid['us_per_event']}{span} | {mid['events_per_s']} | {mid['cpu_share']:.0%} |")
    print()
    print(f"Probe's own Python work per event (no I/O, /generate chunks, K=1): {parse_only_us():.1f} µs.")


if __name__ == "__main__":
    main()
