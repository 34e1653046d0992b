"""Makes the real vLLM CPU logs in tests/fixtures/logs/vllm_cpu_real/: the engine started, crashed and stopped on
purpose, one full log per scenario (stdout and stderr of the launched API server, as specdash's launcher
captures them). Not a test: run by hand after `tests/engine/install_engine.sh .engine`, one scenario or all:

    .venv/bin/python -m tests.engine.make_logs [--only NAME ...] [--out DIR]

Each scenario names how it was made (`HOW`); the labels (`labels.json` next to the logs) were written by
reading each log, not by running specdash on it. Every process it starts is in its own process group, which
it ends by that group only.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.engine.conftest import ENGINE_DTYPE, ENGINE_PYTHON, MODEL_DIR
from tests.support.ports import free_port

OUT = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "vllm_cpu_real"
NGRAM = '{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4,"prompt_lookup_min":2}'
READY_TIMEOUT_S = 900.0
EXIT_TIMEOUT_S = 120.0


@dataclass
class Run:
    """One launched engine: its process (a group leader), port and log."""

    proc: subprocess.Popen[bytes]
    port: int
    log: Path
    began: float = field(default_factory=time.monotonic)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(f"exited with {self.proc.returncode} before ready: {self.log}")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"not ready after {READY_TIMEOUT_S} s: {self.log}")

    def wait_exit(self, timeout: float = EXIT_TIMEOUT_S) -> int | None:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def children(self, title: str) -> list[int]:
        """PIDs of this run's group whose title contains `title` (VLLM::EngineCore, VLLM::Worker)."""
        ps = subprocess.run(["ps", "-eo", "pid=,pgid=,args="], capture_output=True, text=True, check=True)
        out = []
        for line in ps.stdout.splitlines():
            pid, pgid, *rest = line.split(None, 2)
            args = rest[0] if rest else ""
            if int(pgid) == self.proc.pid and title in args and int(pid) != self.proc.pid:
                out.append(int(pid))
        return out

    def end_group(self) -> None:
        """SIGKILL what is left of this run's own process group (never anything else)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(30)


def launch(log: Path, extra: list[str], env: dict[str, str] | None = None, port: int | None = None) -> Run:
    port = port or free_port()
    argv = [
        str(ENGINE_PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(MODEL_DIR),
        "--host", "127.0.0.1", "--port", str(port), "--served-model-name", "small", "--max-model-len", "2048",
        "--dtype", ENGINE_DTYPE, *extra,
    ]  # fmt: skip
    full_env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_HOST_IP": "127.0.0.1",
        "NO_COLOR": "1",
        "no_proxy": "127.0.0.1,localhost",
        **(env or {}),
    }
    handle = log.open("wb")
    proc = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, env=full_env, start_new_session=True)
    handle.close()
    return Run(proc, port, log)


def complete(run: Run, n: int = 4, tokens: int = 32) -> None:
    for i in range(n):
        body = {"model": "small", "prompt": f"def f{i}(x):", "max_tokens": tokens, "ignore_eos": True,
                "temperature": 0}  # fmt: skip
        r = httpx.post(f"http://127.0.0.1:{run.port}/v1/completions", json=body, timeout=120)
        r.raise_for_status()


def stream_in_background(run: Run, started: threading.Event) -> threading.Thread:
    """A long streamed request that is in flight when the scenario kills something."""

    def go() -> None:
        body = {"model": "small", "prompt": "import os\n", "max_tokens": 1500, "ignore_eos": True, "stream": True}
        try:
            with httpx.stream("POST", f"http://127.0.0.1:{run.port}/v1/completions", json=body, timeout=60) as r:
                for _ in r.iter_lines():
                    started.set()
        except httpx.HTTPError:
            pass
        started.set()

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t


def stop_with(sig: signal.Signals, *, group: bool = False) -> Callable[[Run], None]:
    def act(run: Run) -> None:
        run.wait_ready()
        complete(run)
        if group:
            os.killpg(run.proc.pid, sig)
        else:
            run.proc.send_signal(sig)
        run.wait_exit()

    return act


def kill_child_mid_serving(title: str) -> Callable[[Run], None]:
    def act(run: Run) -> None:
        run.wait_ready()
        complete(run, 2)
        started = threading.Event()
        stream_in_background(run, started)
        if not started.wait(60):
            raise RuntimeError("the streamed request did not start")
        pids = run.children(title)
        if not pids:
            raise RuntimeError(f"no {title} in the group")
        os.kill(pids[0], signal.SIGKILL)
        # The API server notices its engine died, fails the request; give it time to say so and exit.
        run.wait_exit(60)

    return act


def wait_for_exit(run: Run) -> None:
    if run.wait_exit(READY_TIMEOUT_S) is None:
        raise RuntimeError(f"still running: {run.log}")


def cut_mid_startup(marker: str) -> Callable[[Run], None]:
    """SIGKILL the whole group once `marker` is in the log: the log ends mid-startup, with no word of it."""

    def act(run: Run) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while marker not in run.log_text():
            if time.monotonic() > deadline or not run.alive():
                raise RuntimeError(f"{marker!r} never came")
            time.sleep(0.1)
        os.killpg(run.proc.pid, signal.SIGKILL)
        run.wait_exit()

    return act


def port_in_use(log: Path) -> Run:
    """Launch on a port a listening socket already holds (held until the engine exits)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    run = launch(log, [], port=sock.getsockname()[1])
    wait_for_exit(run)
    sock.close()
    return run


@dataclass(frozen=True)
class Scenario:
    name: str
    how: str
    extra: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    act: Callable[[Run], None] = wait_for_exit
    custom: Callable[[Path], Run] | None = None


SCENARIOS = (
    Scenario("plain_sigterm_after_serving", "plain, 4 completions, SIGTERM to the API server",
             act=stop_with(signal.SIGTERM)),
    Scenario("plain_sigint_after_serving", "plain, 4 completions, SIGINT (Ctrl-C) to the API server",
             act=stop_with(signal.SIGINT)),
    Scenario("ngram_group_sigterm_after_serving", "ngram, 4 completions, SIGTERM to the whole process group",
             extra=("--speculative-config", NGRAM), act=stop_with(signal.SIGTERM, group=True)),
    Scenario("ngram_enginecore_sigkill_mid_stream", "ngram, SIGKILL of VLLM::EngineCore while a request streams",
             extra=("--speculative-config", NGRAM), act=kill_child_mid_serving("VLLM::EngineCore")),
    Scenario("plain_worker_sigkill_mid_stream", "plain, SIGKILL of VLLM::Worker while a request streams",
             act=kill_child_mid_serving("VLLM::Worker")),
    Scenario("bad_speculative_config_k0", "ngram with num_speculative_tokens 0 (refused in argument validation)",
             extra=("--speculative-config", '{"method":"ngram","num_speculative_tokens":0}')),
    Scenario("missing_model_path", "--model pointing at a directory that does not exist",
             extra=("--model", "/nonexistent/models/small")),
    Scenario("max_model_len_too_long", "--max-model-len 99999 for a model of 2048 positions",
             extra=("--max-model-len", "99999")),
    Scenario("oversized_kv_cache", "VLLM_CPU_KVCACHE_SPACE=4096 (4 TiB of KV cache on a small machine)",
             env=(("VLLM_CPU_KVCACHE_SPACE", "4096"),)),
    Scenario("port_in_use", "launched on a port another socket listens on", custom=port_in_use),
    Scenario("plain_group_sigkill_mid_startup", "plain, SIGKILL of the whole group once weights were loaded",
             act=cut_mid_startup("Loading weights took")),
)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", help="scenario names (default all)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    made_path = args.out / "made.json"
    made = json.loads(made_path.read_text()) if made_path.is_file() else {}
    for sc in SCENARIOS:
        if args.only and sc.name not in args.only:
            continue
        log = args.out / f"vllm_cpu_0320_{sc.name}.log"
        began = time.monotonic()
        run = sc.custom(log) if sc.custom else launch(log, list(sc.extra), dict(sc.env))
        try:
            if sc.custom is None:
                sc.act(run)
        finally:
            if run.alive() or run.children(""):
                run.end_group()
        made[log.name] = {"how": sc.how, "exit": run.proc.returncode, "seconds": round(time.monotonic() - began, 1)}
        print(log.name, made[log.name], flush=True)
        made_path.write_text(json.dumps(made, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
