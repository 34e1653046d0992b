"""Client CPU per SSE event: specdash's probe against plain aiohttp clients and two peer benchmark clients,
SGLang `python -m sglang.bench_serving` and `vllm bench serve` (reference/measurement.md §9, §12).

Setup: the fake SSE server (`tests.support.fake_server`, aiohttp + uvloop) in its own process pinned to CPU 1,
streaming 1 token per chunk every `--interval` s, `--output-len` tokens per request, the same for every client;
each client run is a fresh process (with its whole process tree) pinned to CPU 0, at `--streams` concurrency.
Events are counted by the server (content chunks sent in finished streams, `GET /bench/counters`), so every
client is charged for the same events, whatever it counts itself.

Method (differential, the same for every client): each client runs twice per repeat, with `--base-requests`
N1 and N1 + `--requests` requests. Its CPU (user + sys of the whole process tree: `getrusage(RUSAGE_CHILDREN)`
around the wait, children included) minus its CPU when the server saw its first request (read from
/proc at that instant: the server's `/bench/wait` long-poll answers within a millisecond) is what it spent on
traffic; the per-event figure is

    (cpu_after_first(N2) - cpu_after_first(N1)) / (server events(N2) - server events(N1)).

Start-up (imports, tokenizer, dataset generation: 2-15 s of CPU for the peers) happens before the first
request and is left out exactly; what happens after it but does not grow with the request count (the peers'
warm-up or test request, the first wave's connection set-up, the final report, exit) is the same in both runs
and cancels in the difference. What does grow with the requests (per-request sessions, post-run per-request
metrics, bench_serving's retokenisation of outputs) is charged to the events, as it is part of the client's
cost of streaming. Subtracting the CPU at the first request matters: `vllm bench serve`'s start-up CPU
(10-12 s) varied by up to 1 s between runs on a busy 2-core machine, comparable to what the traffic of 192
requests costs, so the plain whole-process difference (also reported, `us_whole` in the JSON lines) scattered
from 26 to 110 µs per event where the method above gave 63-71. Events per second are
differential too: server events over the time the server had at least one stream open.

Our own clients also report the in-process window figure of earlier runs of this script (`time.process_time()`
over the measured requests only, after one unmeasured wave, divided by the events the client counted; probe-pool
adds its worker's share): a cross-check of the differential method on the clients where both are available.

Clients:
- `floor`: a bare asyncio protocol on uvloop that only counts `data:` bytes per read (no HTTP parsing,
  no SSE, no accounting): the event loop's and the kernel's cost per read, which no Python client beats;
- `plain`: `ClientSession(TCPConnector(limit=C))`, `async for line in resp.content`, counts `data:` lines
  (no parsing at all: a lower bound), default asyncio loop;
- `plain-uvloop`: the same on uvloop;
- `probe`: `specdash.bench.probe.Probe.run_level` on uvloop (what each probe worker process runs: SSE
  splitting, server token counts, per-chunk timing, watchdog, ticker, samples);
- `probe-pool`: the full path, `ProbePool` with one spawned worker plus the parent receiving samples and
  ticks over the pipe;
- `bench_serving`: SGLang's `sglang.benchmark.serving` (what `python -m sglang.bench_serving` runs), from
  `.bench-peers/venv` (`benchmarks/install_peers.sh`): `--backend sglang` (/generate) or `sglang-oai`
  (/v1/completions), `--dataset-name random-ids` (or `random`), fixed lengths, `--max-concurrency C`,
  `--request-rate inf`. Its module imports SGLang's GPU runtime (`sglang/__init__.py`, and
  `sglang.srt.disaggregation.utils` for one constant: torch, triton, CUDA kernels), which cannot be installed on
  a CPU-only machine; `SGLANG_LAUNCHER` runs the unmodified module with those two import chains cut (the
  package `__init__` skipped, the constant read from the source). The request, streaming and metrics code that
  runs per event is SGLang's own, unchanged;
- `vllm-bench`: `vllm bench serve --backend vllm` (/v1/completions) from the vLLM CPU venv
  (`tests/engine/install_engine.sh .engine`), `--dataset-name random`, fixed lengths, `--ignore-eos`.

Ratios "x bench_serving" are taken per repeat (client / bench_serving in the same repeat), then the median.
vLLM's client only speaks the OpenAI endpoints: with `--endpoint generate` its events are smaller (no cumulative
text and ids), which favours it a little.

Usage:
    bash benchmarks/install_peers.sh
    .venv/bin/python benchmarks/probe_cost.py [--repeats 3] [--streams 64] [--interval 0.01] [--requests 192]

Every run is bounded: `--timeout` per client process (its process group is killed after it), a fixed number of
runs, loopback traffic only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OWN = ("floor", "plain", "plain-uvloop", "probe", "probe-pool")
PEERS = ("bench_serving", "vllm-bench")
AGENT = ("agent",)
CLIENTS = OWN + PEERS + AGENT
PATHS = {"generate": "/generate", "completions": "/v1/completions"}
LABELS = {
    "floor": "floor: bare asyncio protocol on uvloop, counts bytes only",
    "plain": "plain aiohttp, `async for line in resp.content`",
    "plain-uvloop": "plain aiohttp + uvloop",
    "probe": "**specdash probe** (`Probe.run_level`, uvloop)",
    "probe-pool": "specdash probe in a worker process + parent (`ProbePool`)",
    "agent": "specdash probe agent (the zipapp a host runs; stdlib asyncio, records to a file; "
    "the follower that streams them back is not counted)",
}

SGLANG_LAUNCHER = """
import ast, importlib.util, pathlib, runpy, sys, types
# Run sglang.benchmark.serving without sglang/__init__.py and sglang.srt.disaggregation.utils, which import
# SGLang's GPU runtime (torch, triton, CUDA kernels); the client code itself is untouched.
root = pathlib.Path(importlib.util.find_spec("sglang").submodule_search_locations[0])
for name, sub in (("sglang", ""), ("sglang.srt", "srt"), ("sglang.srt.utils", "srt/utils"),
                  ("sglang.srt.disaggregation", "srt/disaggregation")):
    mod = types.ModuleType(name)
    mod.__path__ = [str(root / sub)]
    sys.modules[name] = mod
src = (root / "srt/disaggregation/utils.py").read_text()
dis = types.ModuleType("sglang.srt.disaggregation.utils")
dis.FAKE_BOOTSTRAP_HOST = next(
    n.value.value for n in ast.parse(src).body
    if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "FAKE_BOOTSTRAP_HOST"
)
sys.modules[dis.__name__] = dis
sys.argv[0] = "sglang.benchmark.serving"
runpy.run_module("sglang.benchmark.serving", run_name="__main__", alter_sys=True)
"""


def _body(endpoint: str, n: int) -> bytes:
    from specdash.bench.probe import ProbeSettings, request_body
    from specdash.bench.sse import Endpoint

    return request_body(ProbeSettings(endpoint=Endpoint(endpoint), output_len=n), "hi", n)


async def _plain(url: str, endpoint: str, streams: int, requests: int, n: int) -> tuple[int, float, float]:
    import aiohttp

    from specdash.bench.sse import Endpoint

    path, body = Endpoint(endpoint).path, _body(endpoint, n)
    headers = {"Content-Type": "application/json"}
    events = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=streams)) as session:

        async def wave(count: int) -> None:
            nonlocal events
            it = iter(range(count))

            async def slot() -> None:
                nonlocal events
                for _ in it:
                    async with session.post(url + path, data=body, headers=headers) as resp:
                        async for line in resp.content:
                            if line.startswith(b"data: ") and line != b"data: [DONE]\n":
                                events += 1

            await asyncio.gather(*(slot() for _ in range(streams)))

        await wave(streams)
        events = 0
        cpu0, t0 = time.process_time(), time.perf_counter()
        await wave(requests)
        return events, time.process_time() - cpu0, time.perf_counter() - t0


async def _floor(url: str, endpoint: str, streams: int, requests: int, n: int) -> tuple[int, float, float]:
    from urllib.parse import urlsplit

    from specdash.bench.sse import Endpoint

    parts = urlsplit(url)
    body = _body(endpoint, n)
    req = (
        f"POST {Endpoint(endpoint).path} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
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


async def _probe(url: str, endpoint: str, streams: int, requests: int, n: int) -> tuple[int, float, float]:
    from specdash.bench.probe import LevelPlan, ListSink, Probe, ProbeSettings
    from specdash.bench.sse import Endpoint

    async with Probe(url, ProbeSettings(endpoint=Endpoint(endpoint), output_len=n), ("hi",)) as probe:
        await probe.run_level(LevelPlan(concurrency=streams, total_requests=streams), ListSink())
        sink = ListSink()
        cpu0, t0 = time.process_time(), time.perf_counter()
        await probe.run_level(LevelPlan(concurrency=streams, total_requests=requests), sink)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    bad = [s for s in sink.samples if not s.ok or s.output_tokens != n]
    if bad:
        raise SystemExit(f"probe: {len(bad)} bad samples, e.g. {bad[0]}")
    return sum(len(s.chunk_tokens) for s in sink.samples), cpu, wall


async def _probe_pool(url: str, endpoint: str, streams: int, requests: int, n: int) -> tuple[int, float, float]:
    from specdash.bench.probe import LevelPlan, ProbeSettings
    from specdash.bench.samples import RequestSample
    from specdash.bench.sse import Endpoint
    from specdash.bench.workers import ProbePool

    pool = ProbePool(url, ProbeSettings(endpoint=Endpoint(endpoint), output_len=n), ("hi",))

    class Count:
        events = 0

        def sample(self, worker: int, sample: RequestSample) -> None:
            self.events += len(sample.chunk_tokens)

        def tick(self, worker: int, arrivals: list[tuple[int, int]], inflight: int, now_ns: int) -> None:
            pass

        def gauges(self, values: dict[str, float]) -> None:
            pass

    counter = Count()
    try:
        await pool.run_level([LevelPlan(concurrency=streams, total_requests=streams)], Count())
        cpu0, t0 = time.process_time(), time.perf_counter()
        outcomes = await pool.run_level([LevelPlan(concurrency=streams, total_requests=requests)], counter)
        parent_cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    finally:
        await pool.close()
    out = outcomes[0]
    assert out is not None
    # The worker measures its own CPU share over the level (process_time / wall inside run_level).
    return counter.events, parent_cpu + out.headroom.cpu_share * wall, wall


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


def run_client(name: str, url: str, endpoint: str, streams: int, requests: int, n: int) -> dict[str, Any]:
    """Run one of our clients in this process and return its in-window figures."""
    if name != "plain":
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    fn = {"floor": _floor, "plain": _plain, "plain-uvloop": _plain, "probe": _probe, "probe-pool": _probe_pool}[name]
    events, cpu, wall = asyncio.run(fn(url, endpoint, streams, requests, n))
    return {"events": events, "cpu_s": cpu, "wall_s": wall}


def _pin_to(cpu: int) -> None:
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2:
        try:
            os.sched_setaffinity(0, {cpu})
        except OSError:
            pass


def _get_json(url: str, timeout: float) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        data: dict[str, Any] = json.load(resp)
        return data


def _tree_cpu(root: int) -> float:
    """User + sys seconds of `root` and its live descendants (with the children they have reaped), from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    cpu: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # the process ended meanwhile
        fields = raw[raw.rindex(")") + 2 :].split()
        pid = int(entry)
        parent[pid] = int(fields[1])
        cpu[pid] = sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    total, todo, seen = 0, [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen or pid not in cpu:
            continue
        seen.add(pid)
        total += cpu[pid]
        todo.extend(p for p, pp in parent.items() if pp == pid)
    return total / tick


class Forward:
    """`--ssh`: the clients reach the server through an SSH port forward, as `specdash bench HOST` does.

    specdash's own `SSHHost` (asyncssh) runs in a thread of this process and forwards a local port through a
    loopback sshd (the tests' machinery, test user) to the fake server. Its cost is reported apart from the
    client's: this process's CPU (only the forwarding thread works while a client runs) and sshd's (the
    listener and its per-connection children), differenced like the clients'.
    """

    def __init__(self, port: int) -> None:
        import contextlib
        import threading

        sys.path.insert(0, str(ROOT))
        from benchmarks._remote import loopback_sshd
        from specdash.remote.ssh import SSHHost
        from tests.support.sshd import TEST_USER

        self._stack = contextlib.ExitStack()
        server, options = self._stack.enter_context(loopback_sshd())
        self.sshd_pid = server.pid
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="ssh-forward", daemon=True)
        self._thread.start()
        self.host = SSHHost(f"{TEST_USER}@{server.listen}:{server.port}", options)
        self._call(self.host.connect())
        self.local_port: int = self._call(self.host.forward(port))

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def cpu(self) -> tuple[float, float]:
        """(this process's CPU, sshd's CPU) in seconds."""
        return time.process_time(), _tree_cpu(self.sshd_pid)

    def close(self) -> None:
        self._call(self.host.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self._stack.close()


@dataclass
class Run:
    """One client process: server-side counts and its CPU."""

    requests: int
    events: int
    busy_s: float
    cpu_s: float
    """User + sys of the whole process tree."""
    startup_cpu_s: float
    """Its CPU when the server saw its first request."""
    window: dict[str, Any] | None
    """Our own clients' in-process window figures."""
    forward_cpu: tuple[float, float, float, float] | None = None
    """`--ssh`: (specdash's forwarder, sshd) CPU at the first request, then at the end."""


def measure(
    cmd: list[str], url: str, timeout: float, cwd: str, env: dict[str, str], forward: Forward | None = None
) -> Run:
    """Run `cmd` pinned to CPU 0; its CPU (all of it, and at its first request) and the server's counts.

    `url` is the server's own address (counters); the client itself may be pointed at a forward."""
    before = _get_json(url + "/bench/counters", 10)
    deadline = time.monotonic() + timeout
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=cwd, env=env, start_new_session=True,
                                preexec_fn=lambda: _pin_to(0))  # fmt: skip
        try:
            startup = None
            while proc.poll() is None and (left := deadline - time.monotonic()) > 0:
                got = _get_json(f"{url}/bench/wait?requests={before['requests']}&timeout={min(left, 1.0):.3f}", 10)
                if got["requests"] > before["requests"]:
                    startup = _tree_cpu(proc.pid)
                    fwd0 = forward.cpu() if forward is not None else None
                    break
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise SystemExit(f"{cmd[:4]}... did not finish within {timeout:g} s") from None
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        fwd1 = forward.cpu() if forward is not None else None
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if proc.returncode != 0 or startup is None:
        raise SystemExit(f"{cmd[:4]}... failed (exit {proc.returncode}):\n{stdout[-2000:]}\n{stderr[-3000:]}")
    after = _get_json(url + "/bench/counters", 10)
    window = None
    if "--client" in cmd:
        window = json.loads(stdout.strip().splitlines()[-1])
    return Run(
        requests=after["requests"] - before["requests"],
        events=after["chunks"] - before["chunks"],
        busy_s=after["busy_s"] - before["busy_s"],
        cpu_s=ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime,
        startup_cpu_s=startup,
        window=window,
        forward_cpu=(*fwd0, *fwd1) if fwd0 is not None and fwd1 is not None else None,
    )


@dataclass
class Peers:
    """Where the peer clients are and how to call them."""

    sglang_python: Path
    vllm: Path
    tokenizer: Path
    sglang_dataset: str = "random-ids"
    sglang_version: str = "?"
    vllm_version: str = "?"


def _version(python: Path, dist: str) -> str:
    code = f"import importlib.metadata as m; print(m.version({dist!r}))"
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60)
    return out.stdout.strip() or "?"


def check_peers(peers: Peers, names: list[str], env: dict[str, str]) -> None:
    """Fail early with the install hint; pick bench_serving's dataset name; read the versions."""
    hint = "install the peers first: bash benchmarks/install_peers.sh"
    if "bench_serving" in names:
        if not peers.sglang_python.exists():
            raise SystemExit(f"no {peers.sglang_python}: {hint}")
        help_ = subprocess.run([str(peers.sglang_python), "-c", SGLANG_LAUNCHER, "--help"], capture_output=True,
                               text=True, timeout=120, env=env)  # fmt: skip
        if help_.returncode != 0:
            raise SystemExit(f"sglang.benchmark.serving does not start:\n{help_.stderr[-3000:]}\n{hint}")
        if "random-ids" not in help_.stdout:
            peers.sglang_dataset = "random"
        peers.sglang_version = _version(peers.sglang_python, "sglang")
    if "vllm-bench" in names:
        if not peers.vllm.exists():
            raise SystemExit(f"no {peers.vllm}: {hint}")
        peers.vllm_version = _version(peers.vllm.parent / "python", "vllm")
    if any(n in PEERS for n in names) and not (peers.tokenizer / "tokenizer.json").exists():
        raise SystemExit(f"no tokenizer in {peers.tokenizer}: {hint}")


def command(name: str, args: argparse.Namespace, peers: Peers, url: str, requests: int, out_dir: str) -> list[str]:
    """The command line of one client run with `requests` requests."""
    n, c, tok = str(args.output_len), str(args.streams), str(peers.tokenizer)
    if name == "bench_serving":
        backend = "sglang" if args.endpoint == "generate" else "sglang-oai"
        return [str(peers.sglang_python), "-c", SGLANG_LAUNCHER, "--backend", backend, "--base-url", url,
                "--model", tok, "--tokenizer", tok, "--dataset-name", peers.sglang_dataset,
                "--random-input-len", str(args.input_len), "--random-output-len", n, "--random-range-ratio", "1",
                "--num-prompts", str(requests), "--max-concurrency", c, "--request-rate", "inf", "--disable-tqdm",
                "--seed", "1", "--output-file", os.path.join(out_dir, "bench_serving.jsonl")]  # fmt: skip
    if name == "vllm-bench":
        return [str(peers.vllm), "bench", "serve", "--backend", "vllm", "--base-url", url,
                "--endpoint", "/v1/completions", "--model", tok, "--tokenizer", tok, "--dataset-name", "random",
                "--random-input-len", str(args.input_len), "--random-output-len", n, "--random-range-ratio", "0",
                "--num-prompts", str(requests), "--max-concurrency", c, "--request-rate", "inf", "--ignore-eos",
                "--temperature", "0", "--disable-tqdm", "--seed", "1"]  # fmt: skip
    if name == "agent":
        return agent_command(args, url, requests, out_dir)
    return [sys.executable, __file__, "--client", name, "--url", url, "--endpoint", args.endpoint, "--streams", c,
            "--requests", str(requests), "--output-len", n]  # fmt: skip


def agent_command(args: argparse.Namespace, url: str, requests: int, out_dir: str) -> list[str]:
    """The probe agent as a host runs it: the content-hashed zipapp, the host's Python (no uvloop there)."""
    from specdash.bench.agent.bundle import build
    from specdash.bench.agent.wire import PROTOCOL, job_to_dict, plan_to_dict
    from specdash.bench.probe import LevelPlan, ProbeSettings
    from specdash.bench.sse import Endpoint

    bundle = build()
    pyz = Path(out_dir) / bundle.name
    pyz.write_bytes(bundle.data)
    endpoint = Endpoint.GENERATE if args.endpoint == "generate" else Endpoint.COMPLETIONS
    settings = ProbeSettings(endpoint=endpoint, output_len=args.output_len, model="fake-model")
    job = Path(out_dir) / "agent-job.json"
    job.write_text(json.dumps(job_to_dict(url, settings, ("x " * args.input_len,))))
    plan = LevelPlan(concurrency=args.streams, total_requests=requests)
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    return [python, str(pyz), "--job", str(job), "--records", str(Path(out_dir) / f"agent-{requests}.jsonl"),
            "--expect", PROTOCOL, "--plan", json.dumps(plan_to_dict(plan))]  # fmt: skip


def differential(name: str, a: Run, b: Run, extra: int, n: int) -> dict[str, Any]:
    """Per-event figures from a run with N1 requests (`a`) and one with N1 + `extra` (`b`)."""
    d_req, d_ev = b.requests - a.requests, b.events - a.events
    if d_req != extra or d_ev != extra * n:
        raise SystemExit(f"{name}: the server saw {d_req} more requests and {d_ev} more events than in the short "
                         f"run, expected {extra} and {extra * n}: some requests failed or came back short")  # fmt: skip
    us = ((b.cpu_s - b.startup_cpu_s) - (a.cpu_s - a.startup_cpu_s)) / d_ev * 1e6
    r: dict[str, Any] = {
        "client": name,
        "us_per_event": round(us, 1),
        "us_whole": round((b.cpu_s - a.cpu_s) / d_ev * 1e6, 1),
        "events_per_s": round(d_ev / (b.busy_s - a.busy_s)) if b.busy_s > a.busy_s else None,
        "startup_cpu_s": round(statistics.median([a.startup_cpu_s, b.startup_cpu_s]), 2),
        "cpu_s": [round(a.cpu_s, 3), round(b.cpu_s, 3)],
        "cpu_before_first_s": [round(a.startup_cpu_s, 3), round(b.startup_cpu_s, 3)],
        "events": [a.events, b.events],
    }
    if b.window is not None and b.window["events"]:
        r["window_us"] = round(b.window["cpu_s"] / b.window["events"] * 1e6, 1)
    if a.forward_cpu is not None and b.forward_cpu is not None:
        (a0, s0, a1, s1), (b0, t0, b1, t1) = a.forward_cpu, b.forward_cpu
        r["forward_us"] = round(((b1 - b0) - (a1 - a0)) / d_ev * 1e6, 1)
        r["sshd_us"] = round(((t1 - t0) - (s1 - s0)) / d_ev * 1e6, 1)
    return r


def _spread(values: list[float]) -> str:
    values = sorted(values)
    mid = values[len(values) // 2]
    return f"{mid:.1f} ({values[0]:.1f}-{values[-1]:.1f})" if len(values) > 1 else f"{mid:.1f}"


def table(args: argparse.Namespace, peers: Peers, names: list[str], results: list[dict[str, Any]]) -> None:
    """Print the RESULTS.md block."""
    base = {r["repeat"]: r["us_per_event"] for r in results if r["client"] == "bench_serving"}
    labels = dict(LABELS)
    labels["bench_serving"] = f"SGLang bench_serving {peers.sglang_version} (`--backend "
    labels["bench_serving"] += f"{'sglang' if args.endpoint == 'generate' else 'sglang-oai'}`, {PATHS[args.endpoint]})"
    labels["vllm-bench"] = f"vllm bench serve {peers.vllm_version} (`--backend vllm`, /v1/completions)"
    offered = args.streams / args.interval
    print()
    print(f"### probe_cost — {time.strftime('%Y-%m-%d')}, {platform.node()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}")  # fmt: skip
    print()
    print(
        f"{args.streams} streams, 1 token per chunk every {args.interval * 1000:g} ms (≈{offered:.0f} events/s "
        f"offered), {args.output_len} tokens per request, our clients on {PATHS[args.endpoint]}; each client "
        f"run twice per repeat ({args.base_requests} and {args.base_requests + args.requests} requests), CPU of its "
        f"process tree after its first request, differenced over the server's event counts; median of "
        f"{args.repeats} repeats; server and client on separate pinned cores."
    )
    print()
    ssh = any("forward_us" in r for r in results)
    if ssh:
        print("All clients went through an SSH port forward: specdash's SSHHost (asyncssh, in the benchmark's "
              "process) and a loopback sshd; their CPU per event is in the last two columns.")  # fmt: skip
        print()
    extra = " forwarder µs per event | sshd µs per event |" if ssh else ""
    print("| client | CPU µs per event, median (min-max) | events/s | x bench_serving | in-window µs per event "
          f"| start-up CPU s |{extra}")  # fmt: skip
    print("|---|---|---|---|---|---|" + ("---|---|" if ssh else ""))
    for name in names:
        rs = [r for r in results if r["client"] == name]
        us = _spread([r["us_per_event"] for r in rs])
        rates = [r["events_per_s"] for r in rs if r["events_per_s"]]
        rate = f"{statistics.median(rates):.0f}" if rates else "–"
        ratios = [r["us_per_event"] / base[r["repeat"]] for r in rs if base.get(r["repeat"])]
        ratio = f"{statistics.median(ratios):.2f}" if ratios and name != "bench_serving" else "–"
        windows = [r["window_us"] for r in rs if "window_us" in r]
        window = _spread(windows) if windows else "–"
        startup = statistics.median(r["startup_cpu_s"] for r in rs)
        cells = ""
        if ssh:
            cells = f" {_spread([r['forward_us'] for r in rs])} | {_spread([r['sshd_us'] for r in rs])} |"
        print(f"| {labels[name]} | {us} | {rate} | {ratio} | {window} | {startup:.1f} |{cells}")
    print()
    if "probe" in names:
        print(f"Probe's own Python work per event (no I/O, /generate chunks, K=1): {parse_only_us():.1f} µs.")


def main() -> None:
    """Start the server, run each client twice per repeat in its own process, print a table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--interval", type=float, default=0.01, help="seconds per chunk per stream")
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--input-len", type=int, default=128, help="peers' random prompt length (tokens)")
    ap.add_argument("--endpoint", choices=("generate", "completions"), default="generate")
    ap.add_argument("--base-requests", type=int, default=64, help="requests of the short run (N1)")
    ap.add_argument("--requests", type=int, default=192, help="extra requests of the long run (N2 - N1)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--timeout", type=float, default=180.0, help="limit per client process (s)")
    ap.add_argument("--sglang-python", type=Path, default=ROOT / ".bench-peers/venv/bin/python")
    ap.add_argument("--vllm", type=Path, default=ROOT / ".engine/venv-vllm/bin/vllm")
    ap.add_argument("--tokenizer", type=Path, default=ROOT / ".engine/small", help="local HF tokenizer dir")
    ap.add_argument("--ssh", action="store_true", help="clients go through an SSH port forward (loopback sshd)")
    ap.add_argument("--client", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.client:
        _pin_to(0)
        fig = run_client(args.client, args.url, args.endpoint, args.streams, args.requests, args.output_len)
        print(json.dumps(fig))
        return

    names = args.clients.split(",")
    unknown = set(names) - set(CLIENTS)
    if unknown or args.requests < 1 or args.base_requests < 1 or args.repeats < 1:
        raise SystemExit(f"unknown clients {sorted(unknown)} or non-positive counts")
    if not Path("/proc/self/stat").exists():
        raise SystemExit("needs Linux /proc")
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    peers = Peers(args.sglang_python.absolute(), args.vllm.absolute(), args.tokenizer.absolute())
    check_peers(peers, names, env)

    server = subprocess.Popen(
        [sys.executable, "-m", "tests.support.fake_server", "--port", "0", "--k", "1", "--interval",
         str(args.interval)],
        stdout=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=lambda: _pin_to(1), cwd=ROOT,
    )  # fmt: skip
    results: list[dict[str, Any]] = []
    t_start = time.perf_counter()
    forward: Forward | None = None
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        if not line.startswith("listening"):
            raise SystemExit(f"server did not start: {line!r}")
        url = f"http://127.0.0.1:{line.split()[1]}"
        forward = Forward(int(line.split()[1])) if args.ssh else None
        target = f"http://127.0.0.1:{forward.local_port}" if forward is not None else url
        with tempfile.TemporaryDirectory(prefix="probe_cost-") as work:
            for rep in range(args.repeats):
                for name in names:
                    sizes = [args.base_requests, args.base_requests + args.requests]
                    if rep % 2:
                        sizes.reverse()  # alternate the order, so a drift in load does not favour one size
                    runs = {}
                    for size in sizes:
                        cmd = command(name, args, peers, target, size, work)
                        runs[size] = measure(cmd, url, args.timeout, work, env, forward)
                    r = differential(name, runs[min(sizes)], runs[max(sizes)], args.requests, args.output_len)
                    r["repeat"] = rep
                    results.append(r)
                    print(json.dumps(r), flush=True)
    finally:
        if forward is not None:
            forward.close()
        server.terminate()
        server.wait(10)
    print(f"(took {time.perf_counter() - t_start:.0f} s)")
    table(args, peers, names, results)


if __name__ == "__main__":
    main()
