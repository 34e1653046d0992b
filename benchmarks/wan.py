"""Through an 80 ms-RTT link vs on the host: what the SSH tunnel does to TTFT/TPOT/ITL and tok/s.

Run (root: it builds a network namespace): .venv/bin/python benchmarks/wan.py [--levels 1,8,64] [--output-len 128]

The rig is tests/support/wan.py: the simulator and sshd inside a namespace, reached through
tests/support/relay.py (40 ms ± 4 ms each way) and `tbf` (50 Mbit/s each way). The same sweep (`run_sweep`,
duration-free levels of `--waves` x C requests, one sweep per level) runs twice against the simulator,
both over SSH through the relay:

- `tunnel`: the probe here, through an SSH port forward (`[bench] probe = "local"`);
- `agent`: the probe on the host (`specdash.bench.agent`, the default), against the simulator's loopback,
  only its records crossing the link;

and both are compared with the simulator's own per-request log (`--sim-request-log`), summarised by the very
same code (`tests.support.wan.truth_samples` + `summarize`): TTFT from the server's receipt of a request to its first
token, ITL per token from the server's decode steps, tok/s over the same steady-state rule. "Client CPU per
event" is this machine's CPU (this process and its probe worker processes, warmup included; the relay's own
process left out: it stands for the network) over the level's streamed chunks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specdash.bench.agent.wire import sample_from_list  # noqa: E402
from specdash.bench.probe import ProbeSettings  # noqa: E402
from specdash.bench.prompts import load_prompts  # noqa: E402
from specdash.bench.samples import RequestSample  # noqa: E402
from specdash.bench.store import Store  # noqa: E402
from specdash.bench.summary import LevelStats, summarize  # noqa: E402
from specdash.bench.sweep import Sweep, SweepConfig  # noqa: E402
from specdash.core.series import percentile  # noqa: E402
from specdash.remote.ssh import SSHHost  # noqa: E402
from specdash.server.probe_agent import HostRunner  # noqa: E402
from tests.support.netns import Netns  # noqa: E402
from tests.support.sshd import TEST_HOME, Keys, ensure_test_user, make_dir  # noqa: E402
from tests.support.wan import WanHost, client_options, read_truth, truth_samples, wan_host  # noqa: E402


def config(levels: tuple[int, ...], waves: int, output_len: int) -> SweepConfig:
    return SweepConfig(
        mode="baseline",
        levels=levels,
        requests_per_level=None,
        min_requests_factor=waves,
        settings=ProbeSettings(output_len=output_len),
    )


def _cpu_s() -> float:
    """CPU of this process and of its finished children (the probe worker processes)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


async def run_mode(
    wan: WanHost, port: int, cfg: SweepConfig, db: Path, where: str, agent_files: dict[int, Path] | None = None
) -> dict[int, float]:
    """One sweep per level through the relay, the probe here (`tunnel`) or on the host (`agent`); returns this
    machine's CPU seconds per level (warmup included). `agent_files` gets each level's record file on the host
    (the rig's host is this machine: its raw host-clock records pair with the simulator's log)."""
    store = Store(db)
    cpu: dict[int, float] = {}
    runners: list[HostRunner] = []
    async with SSHHost(wan.address, wan.options) as host:
        local = await host.forward(port)

        def agent(settings: ProbeSettings, prompts: tuple[str, ...]) -> HostRunner:
            runners.append(HostRunner(host, f"http://127.0.0.1:{port}", settings, prompts))
            return runners[-1]

        for c in cfg.levels:
            before = _cpu_s()
            sweep = Sweep(
                f"http://127.0.0.1:{local}",
                replace(cfg, levels=(c,), mode=where),
                load_prompts("chat"),
                store,
                link_in_process=True,
                host_runner=agent if where == "agent" else None,
            )
            result = await sweep.run()
            cpu[c] = _cpu_s() - before
            if agent_files is not None and runners:
                agent_files[c] = TEST_HOME / runners[-1].records_path
            assert result.probe is not None and (result.probe["where"] == "host") == (where == "agent"), result.probe
    store.close()
    return cpu


def stats_of(db: Path) -> list[tuple[int, list[RequestSample]]]:
    store = Store(db)
    out = [
        (lv.concurrency, store.samples(run.id, lv.id))
        for run in store.runs()
        for lv in store.levels(run.id)
        if lv.status == "done"
    ]
    out.sort(key=lambda x: x[0])
    store.close()
    return out


def _fmt(p: Any) -> str:
    return "/".join(f"{v:.1f}" if v is not None else "-" for v in (p.p50, p.p90, p.p99))


def row(c: int, where: str, st: LevelStats, truth: LevelStats | None, cpu: str = "") -> str:
    d_ttft = ""
    d_tok = ""
    if truth is not None and st.ttft_ms.p50 is not None and truth.ttft_ms.p50 is not None:
        d_ttft = f"{st.ttft_ms.p50 - truth.ttft_ms.p50:+.1f}"
        d_tok = f"{(st.output_tok_s / truth.output_tok_s - 1) * 100:+.2f} %" if truth.output_tok_s else ""
    return (
        f"| {c} | {where} | {st.completed} | {_fmt(st.ttft_ms)} | {d_ttft} | {_fmt(st.tpot_ms)} | "
        f"{_fmt(st.itl_token_ms)} | {st.output_tok_s:.1f} | {d_tok} | {cpu} |"
    )


def decompose(path: Path, records: list[dict[str, Any]]) -> str:
    """Where the agent's TTFT goes, request by request, on the one clock the rig's host and client share.

    The agent's raw records (host `perf_counter_ns`) and the simulator's log (`time.monotonic`) read the same
    CLOCK_MONOTONIC here, so no offset is estimated. Requests are paired in order: the k-th send with the
    k-th receipt, the k-th first token sent with the k-th read (a wave's requests are not told apart by
    anything else; the gaps' distributions are what this is for)."""
    samples = []
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        if rec.get("t") == "s":
            samples.append(sample_from_list(rec["d"], 0))
    ok = [x for x in samples if x.ok and x.first_token_ns is not None]
    if not ok:
        return "no samples"
    lo, hi = min(x.start_ns for x in ok) / 1e9, max(x.end_ns for x in ok) / 1e9
    length = max(x.requested_tokens for x in ok)
    recs = [r for r in records if lo <= r["received"] <= hi and r["first_sent"] and r["tokens"] == length]
    starts = sorted(x.start_ns / 1e9 for x in ok)
    firsts = sorted(x.first_token_ns / 1e9 for x in ok)
    received = sorted(r["received"] for r in recs)
    sent = sorted(r["first_sent"] for r in recs)
    n = min(len(ok), len(recs))
    parts = {
        "send (agent start -> server socket read)": [
            (b - a) * 1e3 for a, b in zip(starts[:n], received[:n], strict=True)
        ],
        "front end (socket read -> created)": [(r["created"] - r["received"]) * 1e3 for r in recs],
        "scheduler (created -> first token)": [(r["first"] - r["created"]) * 1e3 for r in recs],
        "write (first token -> handed to socket)": [(r["first_sent"] - r["first"]) * 1e3 for r in recs],
        "read (handed to socket -> agent read)": [(b - a) * 1e3 for a, b in zip(sent[:n], firsts[:n], strict=True)],
        "agent TTFT": [x.ttft_ms for x in ok if x.ttft_ms is not None],
    }
    rows = [
        f"{k}: p50 {percentile(v, 50) or 0:.2f} p90 {percentile(v, 90) or 0:.2f} max {max(v, default=0):.2f} ms"
        for k, v in parts.items()
    ]
    return f"{len(ok)} samples, {len(recs)} server records\n  " + "\n  ".join(rows)


def bench_serving_on_host(
    wan: WanHost, port: int, c: int, waves: int, output_len: int, peers: Any, out: Path
) -> tuple[list[float], float, float, str]:
    """SGLang's own bench_serving run inside the namespace against the simulator's loopback, as engineers run
    it next to their server: its per-request TTFTs (ms), the monotonic window it ran in (the simulator's clock:
    one kernel), and its version. No warmup request (the server is warm), fixed lengths."""
    from benchmarks.probe_cost import SGLANG_LAUNCHER

    tok = str(peers.tokenizer)
    argv = [str(peers.sglang_python), "-c", SGLANG_LAUNCHER, "--backend", "sglang",
            "--base-url", f"http://127.0.0.1:{port}", "--model", tok, "--tokenizer", tok,
            "--dataset-name", peers.sglang_dataset, "--random-input-len", "32", "--random-output-len", str(output_len),
            "--random-range-ratio", "1", "--num-prompts", str(max(10, waves * c)), "--max-concurrency", str(c),
            "--request-rate", "inf", "--disable-tqdm", "--seed", "1", "--warmup-requests", "0",
            "--output-file", str(out), "--output-details"]  # fmt: skip
    out.unlink(missing_ok=True)
    t0 = time.monotonic()
    done = wan.ns.exec(*argv, timeout=600)
    t1 = time.monotonic()
    if done.returncode != 0 or not out.exists():
        raise SystemExit(f"bench_serving failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result = json.loads(out.read_text().splitlines()[-1])
    return [t * 1e3 for t in result["ttfts"] if t], t0, t1, peers.sglang_version


def truth_between(records: list[dict[str, Any]], t0: float, t1: float, length: int, socket: bool) -> list[float]:
    """TTFTs (ms) the simulator logged for the requests of `length` tokens it received between `t0` and `t1`."""
    start, first = ("received", "first_sent") if socket else ("created", "first")
    return [
        (r[first] - r[start]) * 1e3 for r in records if t0 <= r["received"] <= t1 and r["tokens"] == length and r[first]
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--levels", default="1,8,64")
    parser.add_argument("--waves", type=int, default=4, help="requests per level = waves x C (at least 10)")
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument(
        "--marginal-waves",
        type=int,
        default=0,
        help="also run the top level with this many waves (more than --waves) in each mode: the CPU of the extra "
        "events alone, per event, without what a sweep costs once (SSH commands, warmup, metric polls)",
    )
    parser.add_argument(
        "--bench-serving",
        action="store_true",
        help="also run SGLang's bench_serving inside the namespace at each level (bash benchmarks/install_peers.sh "
        "sglang; a tokenizer in --tokenizer)",
    )
    parser.add_argument("--tokenizer", type=Path, default=Path(".bench-peers/tokenizer"))
    args = parser.parse_args()
    peers = None
    if args.bench_serving:
        from benchmarks.probe_cost import Peers, check_peers

        repo = Path(__file__).resolve().parent.parent
        peers = Peers(repo / ".bench-peers/venv/bin/python", Path("/nonexistent"), args.tokenizer.absolute())
        check_peers(peers, ["bench_serving"], dict(os.environ))
    levels = tuple(int(x) for x in args.levels.split(","))
    cfg = config(levels, args.waves, args.output_len)
    ensure_test_user()
    directory = make_dir("specdash-wan-")
    keys = Keys.create(directory)
    ns = Netns.create()
    began = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    try:
        with wan_host(ns, keys, client_options(keys, directory), directory) as wan:
            log = directory / "requests.jsonl"
            port = wan.start_sim(request_log=log)
            tunnel_db, host_db = directory / "tunnel.db", directory / "host.db"
            cpu = {"tunnel": asyncio.run(run_mode(wan, port, cfg, tunnel_db, "tunnel"))}
            files: dict[int, Path] = {}
            cpu["agent"] = asyncio.run(run_mode(wan, port, cfg, host_db, "agent", files))
            marginal: dict[str, str] = {}
            if args.marginal_waves > args.waves:
                top = max(levels)
                long_cfg = config((top,), args.marginal_waves, args.output_len)
                for where, db in (("tunnel", tunnel_db), ("agent", host_db)):
                    long_db = db.with_suffix(".long.db")
                    long_cpu = asyncio.run(run_mode(wan, port, long_cfg, long_db, where))[top]
                    short_events = sum(len(x.chunk_tokens) for c, st in stats_of(db) if c == top for x in st)
                    long_events = sum(len(x.chunk_tokens) for _, st in stats_of(long_db) for x in st)
                    extra = long_events - short_events
                    marginal[where] = (
                        f"{(long_cpu - cpu[where][top]) / extra * 1e6:.1f} µs per event over the {extra} extra "
                        f"events ({args.marginal_waves} vs {args.waves} waves at C = {top}: "
                        f"{long_cpu:.3f} - {cpu[where][top]:.3f} s of CPU)"
                    )
            serving: dict[int, tuple[list[float], float, float, str]] = {}
            if peers is not None:
                for c in levels:
                    serving[c] = bench_serving_on_host(
                        wan, port, c, args.waves, args.output_len, peers, directory / f"bench_serving-{c}.jsonl"
                    )
            records = read_truth(log)
            print(f"## Through an 80 ms-RTT link vs on the host ({began})\n")
            print(
                f"`{' '.join(['benchmarks/wan.py', *sys.argv[1:]])}`. Machine: {platform.node()}, "
                f"{os.cpu_count()} cores, Python {platform.python_version()}, Linux {platform.release()}; "
                f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}.\n"
            )
            print(
                "| C | where | ok | TTFT ms p50/p90/p99 | TTFT p50 - truth | TPOT ms p50/p90/p99 "
                "| ITL/token ms p50/p90/p99 | tok/s | tok/s vs truth | client CPU µs/event |"
            )
            print("|--:|---|--:|---|--:|---|---|--:|--:|--:|")
            out: dict[str, Any] = {}
            for (c, tun), (_, hst) in zip(stats_of(tunnel_db), stats_of(host_db), strict=True):
                for where, samples in (("agent", hst), ("tunnel", tun)):
                    slack = 0.15 if where == "agent" else 0.0  # the agent's clock offset is estimated
                    truth = summarize(truth_samples(records, samples, slack), c)
                    socket = summarize(truth_samples(records, samples, slack, socket=True), c)
                    st = summarize(samples, c)
                    events = sum(len(x.chunk_tokens) for x in samples)
                    per_event = f"{cpu[where][c] / events * 1e6:.0f}" if events else ""
                    print(row(c, f"server's truth ({where} run)", truth, None))
                    print(row(c, "server's socket (same requests)", socket, truth))
                    print(row(c, "probe on the host (agent)" if where == "agent" else where, st, truth, per_event))
                    out[f"{c}/{where}"] = {"tok_s": st.output_tok_s, "truth_tok_s": truth.output_tok_s}
            print("\n" + json.dumps(out))
            for where, text in marginal.items():
                print(f"\nMarginal client CPU, {where}: {text}")
            for c, (ttfts, t0, t1, version) in sorted(serving.items()):
                sched = truth_between(records, t0, t1, args.output_len, socket=False)
                sock = truth_between(records, t0, t1, args.output_len, socket=True)
                mine, theirs, theirs_sock = (percentile(x, 50) or float("nan") for x in (ttfts, sched, sock))
                print(
                    f"\nC = {c}, SGLang bench_serving {version} on the host, same server: {len(ttfts)} requests "
                    f"({len(sched)} in the server's log), TTFT p50 {mine:.1f} ms; the server's own p50 "
                    f"{theirs:.1f} (scheduler) / {theirs_sock:.1f} (socket): {mine - theirs:+.1f} / "
                    f"{mine - theirs_sock:+.1f} ms"
                )
            for c, path in sorted(files.items()):
                print(f"\nC = {c}, the agent's TTFT request by request: {decompose(path, records)}")
    finally:
        ns.close()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
