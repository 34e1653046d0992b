"""A real vLLM 0.24.0 on the lent H100: starts, stops, sleeps, crashes and loads, recorded for the fixtures.

Two halves, one file:

* `prepare` runs here (the development machine): it downloads vLLM 0.24.0 and the wheels it needs beyond the
  GPU machine's own packages (reference/gpu.md), strips what a dense Llama on Hopper never loads, packs it all
  with `xz -9` into pieces under the device tool's 64 MiB carry limit, and copies the scripts and specdash's
  source next to them in `.gpu/` (ignored by git, named in the call's `carry`).
* the other subcommands run on the GPU machine, called by `benchmarks/real_gpu.sh` (one call each):
  `stage` keeps a piece, `setup` unpacks and builds the random-weight models, `mode NAME` records one mode's start
  to ready, loads at C = 1, 4, 16, 64 (specdash's probe, then `vllm bench serve` on the same prompt file, with
  the server's own counters read before and after each client's window), an optional sleep/wake with greedy
  outputs before and after, an optional restart, and the stop; `crash NAME` records a start that fails on
  purpose. Everything lands in `$RG/results/`; `pack` tars it into `$OUT`.

Stdlib only on the machine (its python3 is 3.12 with torch); specdash runs from the unpacked payload.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(os.environ.get("RG", "/root/rg"))
"""Where the machine keeps the payload, the models and the results (survives between calls while warm)."""
RESULTS = ROOT / "results"
PORT = 8000
URL = f"http://127.0.0.1:{PORT}"
LEVELS = (1, 4, 16, 64)
OUTPUT_LEN = 256
CALL_BUDGET_S = float(os.environ.get("RG_BUDGET_S", "540"))
"""Seconds one call may spend before it skips what is left (the device tool stops a call at 600 s)."""
CALL_START = float(os.environ.get("RG_CALL_START", time.time()))
"""When the call began (real_gpu.sh sets it once for all its steps)."""
T0 = time.monotonic() - (time.time() - CALL_START)

MODES: dict[str, list[str]] = {
    "baseline": [],
    "ngram": [
        "--speculative-config",
        json.dumps({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}),
    ],
    "eagle3": ["--speculative-config", "EAGLE3"],  # filled in by _mode_args (the draft's path is on the machine)
}
CRASHES: dict[str, list[str]] = {
    # argument validation: refused by pydantic before any GPU work
    "bad_max_model_len": ["--max-model-len", "-5"],
    "ngram_min_above_max": [
        "--speculative-config",
        json.dumps({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 5, "prompt_lookup_max": 2}),
    ],
    # KV allocation: the weights fit, the cache does not
    "kv_cache_no_memory": ["--gpu-memory-utilization", "0.02"],
}


def left() -> float:
    return CALL_BUDGET_S - (time.monotonic() - T0)


def say(msg: str) -> None:
    print(f"[{time.monotonic() - T0:6.1f}s] {msg}", flush=True)


def http(method: str, path: str, body: dict | None = None, timeout: float = 10.0) -> tuple[int, str]:
    data = json.dumps(body).encode() if body is not None else (b"" if method == "POST" else None)
    req = urllib.request.Request(URL + path, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")
    except (OSError, urllib.error.URLError) as exc:
        return 0, f"{type(exc).__name__}: {exc}"


def gpu_memory_mib() -> int | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout
        return int(out.split()[0])
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        return None


class Sampler:
    """nvidia-smi every second and /metrics every 2 s into files, in a thread, until stopped."""

    def __init__(self, name: str) -> None:
        self.smi = (RESULTS / f"{name}.nvidia_smi.csv").open("a")
        self.metrics = (RESULTS / f"{name}.metrics_samples.jsonl").open("a")
        self.stop = threading.Event()
        self.proc = subprocess.Popen(
            [
                "nvidia-smi",
                "--query-gpu=timestamp,memory.used,memory.total,utilization.gpu,power.draw,name",
                "--format=csv",
                "-lms",
                "1000",
            ],
            stdout=self.smi,
            stderr=subprocess.DEVNULL,
        )
        self.thread = threading.Thread(target=self._metrics, daemon=True)
        self.thread.start()

    def _metrics(self) -> None:
        keep = (
            "vllm:num_requests_running",
            "vllm:num_requests_waiting",
            "vllm:kv_cache_usage_perc",
            "vllm:generation_tokens_total",
            "vllm:prompt_tokens_total",
            "vllm:spec_decode",
        )
        while not self.stop.wait(2.0):
            status, text = http("GET", "/metrics", timeout=2)
            if status != 200:
                continue
            lines = [ln for ln in text.splitlines() if ln.startswith(keep)]
            self.metrics.write(json.dumps({"t": time.time(), "lines": lines}) + "\n")
            self.metrics.flush()

    def close(self) -> None:
        self.stop.set()
        self.proc.terminate()
        self.proc.wait(5)
        self.thread.join(5)
        self.smi.close()
        self.metrics.close()


def _mode_args(mode: str) -> list[str]:
    if mode == "eagle3":
        spec = {"method": "eagle3", "model": str(ROOT / "models/eagle3"), "num_speculative_tokens": 2}
        return ["--speculative-config", json.dumps(spec)]
    return MODES[mode]


def launch(
    name: str, extra: list[str], sleep_mode: bool = False, port: int = PORT
) -> tuple[subprocess.Popen[bytes], float, Path]:
    """Start a server in its own session (setsid) with its log in a file; the launch time is the wall clock."""
    log = RESULTS / f"{name}.log"
    cmd = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(ROOT / "models/730m"),
        "--served-model-name",
        "m730",
        "--port",
        str(port),
        "--host",
        "127.0.0.1",
        "--max-model-len",
        "2048",
        "--gpu-memory-utilization",
        "0.5",
        *extra,
    ]
    if sleep_mode:
        cmd.append("--enable-sleep-mode")
    env = dict(os.environ, VLLM_SERVER_DEV_MODE="1")
    with log.open("wb") as fh:
        launched = time.time()
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    (RESULTS / f"{name}.cmd.json").write_text(json.dumps({"argv": cmd, "pid": proc.pid, "launched": launched}))
    say(f"{name}: launched pid {proc.pid}")
    return proc, launched, log


def wait_ready(proc: subprocess.Popen[bytes], launched: float, limit: float) -> float | None:
    """Seconds from launch to the first /health 200, or None when the process died or the limit passed."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return None
        status, _ = http("GET", "/health", timeout=2)
        if status == 200:
            return time.time() - launched
        time.sleep(0.25)
    return None


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of a process group, from /proc."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            out.append(int(stat.parent.name))
    return out


def stop(proc: subprocess.Popen[bytes], limit: float = 60.0) -> dict[str, object]:
    """SIGTERM to the server's process group; seconds until the API server and then the whole group are gone."""
    pgid = os.getpgid(proc.pid)
    t = time.time()
    os.killpg(pgid, signal.SIGTERM)
    try:
        rc = proc.wait(limit)
    except subprocess.TimeoutExpired:
        os.killpg(pgid, signal.SIGKILL)
        rc = proc.wait(10)
    api_gone = time.time() - t
    group_gone = None
    while time.time() - t < limit:
        if not group_members(pgid):
            group_gone = time.time() - t
            break
        time.sleep(0.1)
    else:
        os.killpg(pgid, signal.SIGKILL)
    return {
        "exit": rc,
        "api_server_gone_s": round(api_gone, 2),
        "group_gone_s": None if group_gone is None else round(group_gone, 2),
    }


def wait_exit(proc: subprocess.Popen[bytes], launched: float, limit: float) -> dict[str, object]:
    """For a crash on purpose: exit status and seconds from launch to exit; the group is then stopped."""
    try:
        rc = proc.wait(limit)
    except subprocess.TimeoutExpired:
        rc = None
    took = time.time() - launched
    survivors = group_members(proc.pid)  # started with setsid: its pid is its group
    t = time.time()
    while group_members(proc.pid) and time.time() - t < 20:
        time.sleep(0.2)
    lingered = round(time.time() - t, 2) if survivors else 0.0
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    return {
        "exit": rc,
        "seconds": round(took, 2),
        "group_survivors_at_exit": len(survivors),
        "survivors_lingered_s": lingered,
    }


def metrics_text() -> str:
    status, text = http("GET", "/metrics", timeout=10)
    return text if status == 200 else ""


def counters(text: str) -> dict[str, float]:
    """The counters a client window is compared with (sums over label sets; histograms' _sum and _count)."""
    want = (
        "vllm:generation_tokens_total",
        "vllm:prompt_tokens_total",
        "vllm:request_success_total",
        "vllm:spec_decode_num_drafts_total",
        "vllm:spec_decode_num_draft_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_total",
        "vllm:time_to_first_token_seconds_sum",
        "vllm:time_to_first_token_seconds_count",
        "vllm:inter_token_latency_seconds_sum",
        "vllm:inter_token_latency_seconds_count",
        "vllm:e2e_request_latency_seconds_sum",
        "vllm:e2e_request_latency_seconds_count",
        "vllm:request_generation_tokens_sum",
    )
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in want:
            try:
                out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
            except ValueError:
                continue
    return out


def windowed(name: str, cmd: list[str], limit: float) -> dict[str, object]:
    """Run one client with the server's counters read just before and just after it."""
    before, t0 = counters(metrics_text()), time.time()
    with (RESULTS / f"{name}.out").open("w") as fh:
        try:
            rc: int | None = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=limit).returncode
        except subprocess.TimeoutExpired:
            rc = None
    text = metrics_text()
    t1, after = time.time(), counters(text)
    (RESULTS / f"{name}.metrics_after.txt").write_text(text)
    return {"argv": cmd, "exit": rc, "t0": t0, "t1": t1, "before": before, "after": after}


def loads(mode: str, report: dict[str, object]) -> None:
    prompts = ROOT / "prompts.jsonl"
    windows: list[dict[str, object]] = []
    report["windows"] = windows
    if left() < 120:
        say("loads skipped: too little time left in this call")
        return
    spec = [
        sys.executable,
        "-m",
        "specdash",
        "bench",
        "--url",
        URL,
        "--levels",
        ",".join(map(str, LEVELS)),
        "--prompts",
        str(prompts),
        "--output-len",
        str(OUTPUT_LEN),
        "--endpoint",
        "completions",
        "--db",
        str(RESULTS / f"{mode}.specdash.sqlite"),
        "--json",
    ]
    w = windowed(f"{mode}.specdash_bench", spec, min(240, left() - 60))
    w["client"] = "specdash"
    windows.append(w)
    say(f"{mode}: specdash bench exit {w['exit']}")
    for c in LEVELS:
        if left() < 60:
            say(f"vllm bench serve C={c} skipped: too little time left")
            continue
        n = max(5 * c, 10)
        cmd = [
            sys.executable,
            "-m",
            "vllm.entrypoints.cli.main",
            "bench",
            "serve",
            "--backend",
            "vllm",
            "--base-url",
            URL,
            "--endpoint",
            "/v1/completions",
            "--model",
            "m730",
            "--tokenizer",
            str(ROOT / "models/730m"),
            "--dataset-name",
            "custom",
            "--dataset-path",
            str(prompts),
            "--custom-output-len",
            str(OUTPUT_LEN),
            "--skip-chat-template",
            "--disable-shuffle",
            "--num-prompts",
            str(n),
            "--max-concurrency",
            str(c),
            "--request-rate",
            "inf",
            "--ignore-eos",
            "--temperature",
            "0",
            "--num-warmups",
            str(c),
            "--save-result",
            "--result-dir",
            str(RESULTS),
            "--result-filename",
            f"{mode}.vllm_bench_c{c}.json",
            "--percentile-metrics",
            "ttft,tpot,itl,e2el",
            "--disable-tqdm",
        ]
        w = windowed(f"{mode}.vllm_bench_c{c}", cmd, min(120, left() - 30))
        w["client"] = "vllm bench serve"
        w["concurrency"] = c
        windows.append(w)
        say(f"{mode}: vllm bench serve C={c} exit {w['exit']}")


GREEDY_PROMPTS = 4


def greedy() -> list[str]:
    lines = (ROOT / "prompts.jsonl").read_text().splitlines()[:GREEDY_PROMPTS]
    outs = []
    for line in lines:
        body = {"model": "m730", "prompt": json.loads(line)["prompt"], "max_tokens": 32, "temperature": 0}
        status, text = http("POST", "/v1/completions", body, timeout=60)
        outs.append(json.loads(text)["choices"][0]["text"] if status == 200 else f"HTTP {status}: {text[:200]}")
    return outs


def sleep_wake(report: dict[str, object]) -> None:
    out: dict[str, object] = {"greedy_before": greedy(), "memory_mib_awake": gpu_memory_mib()}
    t = time.time()
    out["sleep_http"] = http("POST", "/sleep?level=1", timeout=120)[0]
    out["sleep_s"] = round(time.time() - t, 3)
    out["is_sleeping_asleep"] = http("GET", "/is_sleeping")[1]
    out["health_asleep"] = http("GET", "/health")[0]
    time.sleep(2)  # nvidia-smi reads memory as the driver has it; give it a sample after the release
    out["memory_mib_asleep"] = gpu_memory_mib()
    t = time.time()
    out["wake_http"] = http("POST", "/wake_up", timeout=120)[0]
    out["wake_s"] = round(time.time() - t, 3)
    out["is_sleeping_awake"] = http("GET", "/is_sleeping")[1]
    time.sleep(2)
    out["memory_mib_woken"] = gpu_memory_mib()
    out["greedy_after"] = greedy()
    out["greedy_same"] = out["greedy_before"] == out["greedy_after"]
    report["sleep_wake"] = out
    say(
        f"sleep {out['sleep_s']} s, wake {out['wake_s']} s, memory {out['memory_mib_awake']} -> "
        f"{out['memory_mib_asleep']} -> {out['memory_mib_woken']} MiB, greedy same: {out['greedy_same']}"
    )


def run_mode(mode: str, do_loads: bool, do_sleep: bool, do_restart: bool) -> None:
    report: dict[str, object] = {"mode": mode}
    sampler = Sampler(mode)
    try:
        proc, launched, _ = launch(mode, _mode_args(mode), sleep_mode=do_sleep)
        report["launched"] = launched
        ready = wait_ready(proc, launched, min(300, left() - 30))
        report["ready_s"] = None if ready is None else round(ready, 2)
        say(f"{mode}: ready after {report['ready_s']} s")
        if ready is None:
            report["exit"] = proc.poll()
        else:
            (RESULTS / f"{mode}.metrics_ready.txt").write_text(metrics_text())
            if do_loads:
                loads(mode, report)
            if do_sleep and left() > 60:
                sleep_wake(report)
            report["stop"] = stop(proc)
            say(f"{mode}: stop {report['stop']}")
            if do_restart and left() > 150:
                proc, launched2, _ = launch(f"{mode}_restart", _mode_args(mode), sleep_mode=do_sleep)
                ready2 = wait_ready(proc, launched2, min(240, left() - 20))
                report["restart"] = {"launched": launched2, "ready_s": None if ready2 is None else round(ready2, 2)}
                if ready2 is not None:
                    report["restart"]["greedy"] = greedy()  # type: ignore[index]
                report["restart"]["stop"] = stop(proc)  # type: ignore[index]
                say(f"{mode}: restart {report['restart']}")
    finally:
        sampler.close()
        (RESULTS / f"{mode}.report.json").write_text(json.dumps(report, indent=1))


def run_crash(name: str) -> None:
    port = PORT + 1 + sorted(CRASHES).index(name)  # crashes may run beside each other or a server
    proc, launched, _ = launch(f"crash_{name}", CRASHES[name], port=port)
    result = wait_exit(proc, launched, min(180, left() - 20))
    result["launched"] = launched
    result["args"] = CRASHES[name]
    (RESULTS / f"crash_{name}.report.json").write_text(json.dumps(result, indent=1))
    say(f"crash {name}: {result}")


def setup() -> None:
    """Unpack the pieces, install what the machine lacks, build the models (once per machine)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    site = ROOT / "site"
    if not (site / "vllm").is_dir():
        pieces = sorted((ROOT / "pieces").glob("payload.tar.xz.*"))
        say(f"unpacking {len(pieces)} pieces")
        subprocess.run(f"cat {' '.join(map(str, pieces))} | xz -d -T0 | tar -x -C {ROOT}", shell=True, check=True)
        shutil.move(str(ROOT / "vsite"), str(site))
        missing = wheels_to_install(ROOT / "whl")
        (RESULTS / "installed_wheels.json").write_text(json.dumps(missing, indent=1))
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-index",
                "--no-deps",
                "--no-compile",
                "--target",
                str(site),
                *missing,
            ],
            check=True,
        )
        say(f"installed {len(missing)} wheels")
    models = ROOT / "models"
    if not (models / "730m" / "config.json").is_file():
        app = Path(__file__).resolve().parent.parent
        subprocess.run(
            [
                sys.executable,
                str(app / "tests/engine/build_model.py"),
                "--size",
                "730m",
                "--out",
                str(models / "730m"),
                "--eagle3-draft",
                str(models / "eagle3"),
            ],
            check=True,
        )
    app = Path(__file__).resolve().parent.parent
    shutil.copy(app / "specdash/bench/prompts/chat.jsonl", ROOT / "prompts.jsonl")


def wheels_to_install(folder: Path) -> list[str]:
    """The wheels whose distribution the machine lacks or has at another version than the resolved one.

    The resolution (pip's report, made by `prepare`) pinned the machine's known versions of torch, numpy,
    transformers and tokenizers; everything else is carried and installed when the machine's copy differs,
    into a folder ahead of the system's on PYTHONPATH, so nothing of the machine's is changed.
    """
    from importlib import metadata

    picked = []
    for whl in sorted(folder.glob("*.whl")):
        name, version = whl.name.split("-")[:2]
        try:
            have = metadata.version(name.replace("_", "-"))
        except metadata.PackageNotFoundError:
            have = None
        if have != version:
            picked.append(str(whl))
    return picked


def pack(out: Path, tag: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-cJf", str(out / f"results-{tag}.tar.xz"), "-C", str(ROOT), "results"], check=True)


def env_report() -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    cmds = {
        "nvidia_smi": ["nvidia-smi"],
        "python": [sys.executable, "-VV"],
        "pip_list": [sys.executable, "-m", "pip", "list", "--format=freeze"],
        "cpus": ["nproc"],
    }
    out = {}
    for key, cmd in cmds.items():
        try:
            out[key] = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired) as exc:
            out[key] = str(exc)
    (RESULTS / "machine.json").write_text(json.dumps(out, indent=1))


def summary(folder: Path) -> str:
    """The figures of a run (here, over the recorded fixtures): the side-by-side table, starts, sleep and wake."""
    out = [
        "| mode | C | specdash tok/s | server over specdash's level | vllm bench serve tok/s | "
        "server's generated tokens over vllm bench's window |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    starts = ["| mode | launch to /health 200 (s) | SIGTERM to group gone (s) |", "|---|---:|---:|"]
    for mode in MODES:
        report = json.loads((folder / f"{mode}.report.json").read_text())
        spec = json.loads((folder / f"{mode}.specdash_bench.json").read_text())
        levels = {lv["concurrency"]: lv for lv in spec["levels"]}
        windows = {w.get("concurrency"): w for w in report["windows"] if w["client"] == "vllm bench serve"}
        for c in LEVELS:
            lv, w = levels[c], windows[c]
            bench = json.loads((folder / f"{mode}.vllm_bench_c{c}.json").read_text())
            generated = w["after"]["vllm:generation_tokens_total"] - w["before"]["vllm:generation_tokens_total"]
            out.append(
                f"| {mode} | {c} | {lv['stats']['output_tok_s']:,.0f} | {lv['server']['tok_s']:,.0f} | "
                f"{bench['output_throughput']:,.0f} | {generated:,.0f} = {bench['total_output_tokens']:,} counted by "
                f"the client + {c} warm-up x {OUTPUT_LEN} |"
            )
        starts.append(f"| {mode} | {report['ready_s']} | {report['stop']['group_gone_s']} |")
        if "restart" in report:
            starts.append(
                f"| {mode} restart | {report['restart']['ready_s']} | {report['restart']['stop']['group_gone_s']} |"
            )
    return "\n".join(out + [""] + starts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("setup")
    sub.add_parser("env")
    p = sub.add_parser("mode")
    p.add_argument("name", choices=sorted(MODES))
    p.add_argument("--no-loads", action="store_true")
    p.add_argument("--sleep", action="store_true")
    p.add_argument("--restart", action="store_true")
    p = sub.add_parser("crash")
    p.add_argument("name", choices=sorted(CRASHES))
    p = sub.add_parser("summary", help="print the figures of a recorded run (e.g. tests/fixtures/real_gpu)")
    p.add_argument("folder", type=Path)
    p = sub.add_parser("pack")
    p.add_argument("out", type=Path)
    p.add_argument("tag")
    args = parser.parse_args()
    if args.cmd == "setup":
        setup()
    elif args.cmd == "env":
        env_report()
    elif args.cmd == "mode":
        run_mode(args.name, not args.no_loads, args.sleep, args.restart)
    elif args.cmd == "crash":
        run_crash(args.name)
    elif args.cmd == "summary":
        print(summary(args.folder))
    elif args.cmd == "pack":
        pack(args.out, args.tag)


if __name__ == "__main__":
    main()
