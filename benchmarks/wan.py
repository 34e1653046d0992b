"""Through an 80 ms-RTT link vs on the host: what the SSH tunnel does to TTFT/TPOT/ITL and tok/s.

Run (root: it builds a network namespace): .venv/bin/python benchmarks/wan.py [--levels 1,8,64] [--output-len 128]

The rig is tests/wan.py: the simulator and sshd inside a namespace, reached through tests/relay.py (40 ms ±
4 ms each way) and `tbf` (50 Mbit/s each way). The same sweep (`run_sweep`, duration-free levels of
`--waves` x C requests) runs twice against the simulator:

- `tunnel`: from here, through an SSH port forward over the relay (today's `specdash bench`);
- `host`: inside the namespace, against the simulator's loopback (where a probe agent on the host runs);

and both are compared with the simulator's own per-request log (`--sim-request-log`), summarised by the very
same code (`tests.wan.truth_samples` + `summarize`): TTFT from the server's receipt of a request to its first
token, ITL per token from the server's decode steps, tok/s over the same steady-state rule.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specdash.bench.levels import LevelResult  # noqa: E402
from specdash.bench.probe import ProbeSettings  # noqa: E402
from specdash.bench.prompts import load_prompts  # noqa: E402
from specdash.bench.samples import RequestSample  # noqa: E402
from specdash.bench.store import Store  # noqa: E402
from specdash.bench.summary import LevelStats, summarize  # noqa: E402
from specdash.bench.sweep import SweepConfig, run_sweep  # noqa: E402
from specdash.remote.ssh import SSHHost  # noqa: E402
from tests.netns import Netns  # noqa: E402
from tests.sshd import Keys, ensure_test_user, make_dir  # noqa: E402
from tests.wan import REPO, WanHost, client_options, read_truth, truth_samples, wan_host  # noqa: E402


def config(levels: tuple[int, ...], waves: int, output_len: int) -> SweepConfig:
    return SweepConfig(
        mode="baseline",
        levels=levels,
        requests_per_level=None,
        min_requests_factor=waves,
        settings=ProbeSettings(output_len=output_len),
    )


async def sweep(url: str, cfg: SweepConfig, db: Path) -> list[tuple[LevelResult, list[RequestSample]]]:
    store = Store(db)
    result = await run_sweep(url, cfg, load_prompts("chat"), store)
    assert result.run_id is not None
    out = [(lv, store.samples(result.run_id, lv.level_id)) for lv in result.levels if lv.level_id is not None]
    store.close()
    return out


async def through_tunnel(wan: WanHost, port: int, cfg: SweepConfig, db: Path) -> list[tuple[LevelResult, list[Any]]]:
    async with SSHHost(wan.address, wan.options) as host:
        local = await host.forward(port)
        return await sweep(f"http://127.0.0.1:{local}", cfg, db)


def on_host(wan: WanHost, port: int, args: argparse.Namespace, db: Path) -> None:
    """This script again, inside the namespace (`--on-host`): the probe next to the server."""
    argv = [sys.executable, __file__, "--on-host", str(port), "--db", str(db)]
    argv += ["--levels", args.levels, "--waves", str(args.waves), "--output-len", str(args.output_len)]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(["ip", "netns", "exec", wan.ns.name, *argv], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"on-host sweep failed: {done.stderr[-2000:]}")


def stats_of(db: Path) -> list[tuple[int, list[RequestSample]]]:
    store = Store(db)
    run = store.runs()[-1]
    out = [(lv.concurrency, store.samples(run.id, lv.id)) for lv in store.levels(run.id) if lv.status == "done"]
    store.close()
    return out


def _fmt(p: Any) -> str:
    return "/".join(f"{v:.1f}" if v is not None else "-" for v in (p.p50, p.p90, p.p99))


def row(c: int, where: str, st: LevelStats, truth: LevelStats | None) -> str:
    d_ttft = ""
    d_tok = ""
    if truth is not None and st.ttft_ms.p50 is not None and truth.ttft_ms.p50 is not None:
        d_ttft = f"{st.ttft_ms.p50 - truth.ttft_ms.p50:+.1f}"
        d_tok = f"{(st.output_tok_s / truth.output_tok_s - 1) * 100:+.2f} %" if truth.output_tok_s else ""
    return (
        f"| {c} | {where} | {st.completed} | {_fmt(st.ttft_ms)} | {d_ttft} | {_fmt(st.tpot_ms)} | "
        f"{_fmt(st.itl_token_ms)} | {st.output_tok_s:.1f} | {d_tok} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--levels", default="1,8,64")
    parser.add_argument("--waves", type=int, default=4, help="requests per level = waves x C (at least 10)")
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--on-host", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--db", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    levels = tuple(int(x) for x in args.levels.split(","))
    cfg = config(levels, args.waves, args.output_len)
    if args.on_host is not None:
        asyncio.run(sweep(f"http://127.0.0.1:{args.on_host}", cfg, Path(args.db)))
        return
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
            asyncio.run(through_tunnel(wan, port, cfg, tunnel_db))
            on_host(wan, port, args, host_db)
            records = read_truth(log)
            print(f"## Through an 80 ms-RTT link vs on the host ({began})\n")
            print(
                f"`{' '.join(['benchmarks/wan.py', *sys.argv[1:]])}`. Machine: {platform.node()}, "
                f"{os.cpu_count()} cores, Python {platform.python_version()}, Linux {platform.release()}; "
                f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}.\n"
            )
            print(
                "| C | where | ok | TTFT ms p50/p90/p99 | TTFT p50 - truth | TPOT ms p50/p90/p99 "
                "| ITL/token ms p50/p90/p99 | tok/s | tok/s vs truth |"
            )
            print("|--:|---|--:|---|--:|---|---|--:|--:|")
            out: dict[str, Any] = {}
            for (c, tun), (_, hst) in zip(stats_of(tunnel_db), stats_of(host_db), strict=True):
                for where, samples in (("host", hst), ("tunnel", tun)):
                    truth = summarize(truth_samples(records, samples), c)
                    st = summarize(samples, c)
                    print(row(c, f"server's truth ({where} run)", truth, None))
                    print(row(c, where, st, truth))
                    out[f"{c}/{where}"] = {"tok_s": st.output_tok_s, "truth_tok_s": truth.output_tok_s}
            print("\n" + json.dumps(out))
    finally:
        ns.close()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
