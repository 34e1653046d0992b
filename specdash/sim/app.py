"""The simulator's main process: SGLang's launcher, tokenizer manager and HTTP server in one asyncio loop.

Lifecycle, as in SGLang (engines.md 2.1, 7.1):
1. Warnings and `server_args=...`, then one child per TP rank (`specdash.sim.ranks`), which print the
   per-rank startup lines. Nothing listens yet: clients get connection refused.
2. When every rank has written `ready`: uvicorn's startup lines, then the bind. A busy port fails *here*,
   after the whole load, with uvicorn's `[Errno 98]` text (SGLang never pre-checks it).
3. Warmup through real HTTP to ourselves (`GET /get_model_info`, `POST /generate`); `/health` is 503 until
   it returns, then `The server is fired up and ready to roll!` and 200.

Signals: before the first request SIGTERM has Python's default action (SGLang installs its handler lazily);
since our children have no PDEATHSIG we kill them first so the outcome matches SGLang's. After the first
request SIGTERM drains: 503 on health, `Gracefully exiting...` every 5 s, then `kill_process_tree`, which
SIGKILLs the children and the main process itself (exit status -9, as SGLang's). SIGQUIT (a child failed)
logs SGLang's line and kills the tree too.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Coroutine
from typing import Any, NoReturn

from aiohttp import ClientSession, ClientTimeout, web

from specdash.sim.args import SimConfig
from specdash.sim.faults import crash_traceback, warmup_fail_lines
from specdash.sim.gpus import pid_alive, write_load
from specdash.sim.logstyle import LogWriter
from specdash.sim.model import BASELINE, BASELINE_MAX_RUNNING, SPEC_COSTS, ThroughputModel
from specdash.sim.presets import Preset, choose_preset
from specdash.sim.rendezvous import Rendezvous
from specdash.sim.scheduler import Scheduler, SimRequest
from specdash.sim.server import ReceiptStamp, SimServer, Status
from specdash.sim.spec_space import DraftShape, step_cost
from specdash.sim.vllm_api import StatsLogger, VllmSleep
from specdash.sim.vllm_log import VllmLogWriter, api_server_lines, routes_lines, shutdown_lines

LOAD_EVERY_S = 0.5
"""Seconds between two reports of the load to the simulated `nvidia-smi`."""
DRAIN_POLL_S = 5.0
"""SGLang's SIGTERM watchdog period (scaled by --sim-time-scale, at least 50 ms)."""


def build_model(config: SimConfig) -> ThroughputModel:
    """The throughput model for the configured mode."""
    algo = config.speculative_algorithm
    spec = SPEC_COSTS.get(algo) if algo else None
    num_steps = config.speculative_num_steps or 1
    if algo in ("EAGLE", "EAGLE3"):
        # The draft parameters shape acceptance and cost (specdash.sim.spec_space).
        shape = DraftShape(num_steps, config.speculative_eagle_topk or 1, config.speculative_num_draft_tokens or 2)
        spec, num_steps = step_cost(algo, shape), shape.depth
    return ThroughputModel(
        baseline=BASELINE,
        spec=spec,
        num_steps=num_steps,
        max_running=config.max_running_requests or BASELINE_MAX_RUNNING,
        disable_spec_above=config.disable_spec_above,
        speed=config.speed,
    )


def request_record(req: SimRequest) -> dict[str, Any]:
    """One `--sim-request-log` line: the server's own timestamps of a finished request.

    Times are `time.monotonic()` seconds (CLOCK_MONOTONIC: on Linux the same clock as a client's
    `perf_counter`, across network namespaces too): `created` when the request was parsed, `first` when its
    first token was produced, `finished` at its last; `emitted` lists (time, cumulative tokens) per step.
    `received` (its first bytes read from the socket: `ReceiptStamp`) and `first_sent` (its first token handed to
    the socket) are the same request seen at the server's socket: the difference from `created`/`first` is the
    front end's own queue and serialisation, which every client counts in its TTFT.
    """
    return {
        "rid": req.rid,
        "received": req.received,
        "created": req.created,
        "first": req.first_token_at,
        "first_sent": req.first_sent,
        "finished": req.finished_at,
        "tokens": len(req.output_ids),
        "emitted": req.emitted,
    }


class ProcessTree:
    """The TP children, killed the way SGLang's `kill_process_tree` does (SIGKILL, children first)."""

    def __init__(self, spare: bool = False) -> None:
        self.procs: list[asyncio.subprocess.Process] = []
        self.spare = spare
        """`--sim-fault orphan-ranks`: the kill misses the children."""

    def kill_children(self) -> None:
        """SIGKILL every child still alive."""
        if self.spare:
            return
        for proc in self.procs:
            if proc.returncode is None:
                try:
                    os.kill(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def kill_all(self) -> NoReturn:
        """Children, then ourselves: `kill_process_tree(os.getpid())` with the parent included."""
        self.kill_children()
        os.kill(os.getpid(), signal.SIGKILL)
        raise SystemExit(137)  # unreachable: SIGKILL cannot be caught


class SimApp:
    """One simulated SGLang server process."""

    def __init__(self, config: SimConfig, warnings: list[str]) -> None:
        self.c = config
        self.warnings = warnings
        self.log: LogWriter = (
            VllmLogWriter(config.tp_size) if config.vllm else LogWriter(config.style_2026, config.tp_size)
        )
        self.preset: Preset = choose_preset(config.model_path, config.tp_size)
        self.tree = ProcessTree(spare=config.faults.orphan_ranks)
        self.scheduler = Scheduler(
            build_model(config),
            self.log,
            seed=config.seed,
            kv_tokens=self.preset.kv_tokens,
            cuda_graph_max_bs=config.cuda_graph_max_bs,
            num_draft_tokens=config.speculative_num_draft_tokens or 1,
            decode_log_interval=config.decode_log_interval,
            crash_at_batch=config.faults.crash_at_batch,
            on_crash=self._crash,
            on_finish=self._log_request if config.request_log else None,
        )
        self._request_log = open(config.request_log, "a", buffering=1) if config.request_log else None
        self.server = SimServer(config, self.preset, self.scheduler, self.log)
        self.uvicorn_started = False
        self._rendezvous: Rendezvous | None = None
        """The head node's store for the ranks of several nodes (None on one node)."""
        self._listener: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def _log_request(self, req: SimRequest) -> None:
        if self._request_log is not None:
            self._request_log.write(json.dumps(request_record(req), separators=(",", ":")) + "\n")

    def _scaled(self, seconds: float) -> float:
        return seconds * self.c.time_scale

    def _spawn_task(self, coro: Coroutine[Any, Any, None]) -> None:
        # Keep a reference: the loop holds tasks only weakly, and a collected task would vanish silently.
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- signals -------------------------------------------------------------------------------

    def _install_signals(self) -> None:
        loop = asyncio.get_running_loop()
        if self.c.vllm:  # vLLM shuts down on SIGTERM at any time, printing its [shutdown] lines
            loop.add_signal_handler(signal.SIGTERM, self._vllm_shutdown)
            loop.add_signal_handler(signal.SIGINT, self._vllm_shutdown)
            loop.add_signal_handler(signal.SIGQUIT, self._on_sigquit)
            return
        loop.add_signal_handler(signal.SIGQUIT, self._on_sigquit)
        loop.add_signal_handler(signal.SIGTERM, self._on_early_sigterm)
        loop.add_signal_handler(signal.SIGINT, self._on_sigint)
        self.server.first_request_hook = self._install_drain_handler

    def _vllm_shutdown(self) -> None:
        assert isinstance(self.log, VllmLogWriter)
        engine = self.tree.procs[0].pid if self.tree.procs else 0
        shutdown_lines(self.log, engine, uvicorn=self.uvicorn_started)
        self.tree.kill_children()
        os._exit(0)

    def _install_drain_handler(self) -> None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, self._on_sigterm)

    def _on_sigquit(self) -> None:
        if self.c.style_2026:
            self.log.log("SIGQUIT received. signum=None, frame=None. It usually means one child failed.")
        else:
            self.log.log("Received sigquit from a child process. It usually means the child failed.")
        self.tree.kill_all()

    def _on_early_sigterm(self) -> None:
        # Python's default action kills the launcher; SGLang's children then die through PDEATHSIG.
        self.tree.kill_children()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    def _on_sigint(self) -> None:
        if self.uvicorn_started:
            self.log.uvicorn("INFO", "Shutting down")
            self.log.uvicorn("INFO", "Waiting for application shutdown.")
            self.log.uvicorn("INFO", "Application shutdown complete.")
            self.log.uvicorn("INFO", f"Finished server process [{os.getpid()}]")
        self.tree.kill_children()
        os._exit(0)

    def _on_sigterm(self) -> None:
        if self.server.gracefully_exit:
            return
        self.log.log("SIGTERM received. signum=None frame=None. Draining requests and shutting down...")
        self.server.gracefully_exit = True
        self._spawn_task(self._drain())

    async def _drain(self) -> None:
        poll = max(self._scaled(DRAIN_POLL_S), 0.05)
        await asyncio.sleep(poll)  # the watchdog notices the flag on its next 5 s tick
        while True:
            rids = self.scheduler.pending_rids()
            if self.server.status is Status.UNHEALTHY:
                self.log.log("Signal SIGTERM received while health check failed. Force exiting.")
                break
            if os.environ.get("SGL_FORCE_SHUTDOWN", "").lower() in ("1", "true"):
                self.log.log("Signal SIGTERM received while force shutdown flag set. Force exiting.")
                break
            self.log.log(
                f"Gracefully exiting... Remaining number of requests {len(rids)}. "
                f"Remaining requests remaining_rids={rids}."
            )
            if not rids and not self.server.responding:
                break
            await asyncio.sleep(poll)
        self.tree.kill_all()

    def _crash(self) -> None:
        """`crash-at-batch`: rank 0's scheduler dies; it prints the traceback and SIGQUITs us."""
        proc = self.tree.procs[0] if self.tree.procs else None
        if proc is not None and proc.stdin is not None and proc.returncode is None:
            try:
                proc.stdin.write(b"crash\n")
                return
            except (ConnectionError, RuntimeError):
                pass
        body = crash_traceback(self.c.spec_v2)  # rank 0 is gone: print it ourselves
        self.log.lines(body[0], body[1:], 0)
        self._on_sigquit()

    # ---- startup -------------------------------------------------------------------------------

    async def _serve_rendezvous(self) -> bool:
        """The head node of several serves the store the ranks meet at (`sim.rendezvous`), as torch's TCPStore
        on `--dist-init-addr`; a port it cannot take fails the start with TCPStore's words."""
        if self.c.nnodes <= 1 or self.c.node_rank != 0 or not self.c.dist_init_addr:
            return True
        host, _, port = self.c.dist_init_addr.rpartition(":")
        self._rendezvous = Rendezvous(self.c.tp_size)
        try:
            await self._rendezvous.start(host.strip("[]"), int(port))
        except OSError as exc:
            self.log.log(
                "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
                f"address. port: {port}, useIPv6: 0, code: -{exc.errno or 98}, name: EADDRINUSE, message: "
                "address already in use"
            )
            return False
        return True

    async def _start_ranks(self) -> bool:
        payload = json.dumps(self.c.to_json())
        first = self.c.first_rank
        for rank in range(first, first + self.c.ranks_per_node):
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "specdash.sim.ranks",
                payload,
                str(rank),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
            self.tree.procs.append(proc)
        for proc in self.tree.procs:  # the start barrier: every rank is up before the schedule starts
            assert proc.stdout is not None
            if (await proc.stdout.readline()).strip() != b"started":
                self.log.log("Initialization failed. Please see the error messages above.")
                self.tree.kill_children()
                return False
        t0 = time.time()
        for proc in self.tree.procs:
            assert proc.stdin is not None
            proc.stdin.write(f"go {t0!r}\n".encode())
        for rank, proc in enumerate(self.tree.procs, start=first):
            assert proc.stdout is not None
            line = await proc.stdout.readline()
            if line.strip() != b"ready":
                await asyncio.sleep(0.5)  # a failing rank SIGQUITs us; give that signal time to land
                code = await proc.wait()
                self.log.log(f"Rank {rank} scheduler is dead. Please check if there are relevant logs.")
                self.log.log(f"Exit code: {code}")
                self.log.log("Initialization failed. Please see the error messages above.")
                self.tree.kill_children()
                return False
        return True

    def _uvicorn_lines(self) -> None:
        self.log.uvicorn("INFO", f"Started server process [{os.getpid()}]")
        self.log.uvicorn("INFO", "Waiting for application startup.")
        self.log.uvicorn("INFO", "Application startup complete.")
        self.uvicorn_started = True

    async def _bind(self) -> web.AppRunner | None:
        if not self.c.vllm:  # vLLM binds its socket before uvicorn starts: its lines follow the bind
            self._uvicorn_lines()
        runner = web.AppRunner(self.server.make_app(), access_log=None, handle_signals=False)
        await runner.setup()
        try:
            if self.c.faults.port_in_use:
                raise OSError(98, "address already in use")
            # TCPSite's listener, its protocol wrapped to stamp each request's receipt (`ReceiptStamp`).
            factory = runner.server
            assert factory is not None
            receipts = self.server.receipts
            self._listener = await asyncio.get_running_loop().create_server(
                lambda: ReceiptStamp(factory(), receipts), self.c.host, self.c.port, backlog=4096, reuse_address=True
            )
        except OSError as exc:
            # asyncio's strerror already embeds "error while attempting to bind on address ...: "; keep
            # only the OS reason so the line reads exactly like uvicorn's.
            reason = (exc.strerror or "address already in use").rsplit(": ", 1)[-1].lower()
            self.log.uvicorn(
                "ERROR",
                f"[Errno {exc.errno}] error while attempting to bind on address "
                f"({self.c.host!r}, {self.c.port}): {reason}",
            )
            self.log.uvicorn("INFO", "Waiting for application shutdown.")
            self.log.uvicorn("INFO", "Application shutdown complete.")
            await runner.cleanup()
            return None
        if self.c.vllm:
            self._uvicorn_lines()
        else:  # vLLM's uvicorn logs no `Uvicorn running` line
            self.log.uvicorn("INFO", f"Uvicorn running on http://{self.c.host}:{self.c.port} (Press CTRL+C to quit)")
        return runner

    async def _warmup(self) -> None:
        host = "127.0.0.1" if self.c.host in ("0.0.0.0", "::") else self.c.host
        base = f"http://{host}:{self.c.port}"
        # SGLang's warmup thread polls /get_model_info once a second; the first poll after bind succeeds.
        await asyncio.sleep(min(1.0, max(0.01, self._scaled(1.0))))
        async with ClientSession(timeout=ClientTimeout(total=None)) as session:
            async with session.get(f"{base}/get_model_info") as resp:
                await resp.read()
            if self.c.faults.hang_at == "warmup":
                return  # stays Starting: /health answers 503 forever
            if self.c.skip_server_warmup:
                self.server.status = Status.UP
                self.log.log("The server is fired up and ready to roll!")
                return
            warmup = self._scaled(self.preset.warmup_s + self.c.faults.slow_warmup)
            self.scheduler.first_batch_delay = warmup
            if self.c.faults.warmup_fail:
                await asyncio.sleep(warmup)
                lines = warmup_fail_lines()
                self.log.lines(lines[0], lines[1:])
                self.tree.kill_all()
            body = {"text": "The capital city of France is", "sampling_params": {"temperature": 0, "max_new_tokens": 8}}
            async with session.post(f"{base}/generate", json=body) as resp:
                await resp.read()
        self.server.status = Status.UP
        self.log.log("The server is fired up and ready to roll!")

    async def run(self) -> int:
        """Run until killed; returns only on a startup failure that SGLang survives to exit from."""
        self._install_signals()
        for line in self.warnings:
            self.log.log(line)
        if self.c.unknown_flags:
            self.log.log(f"specdash sim: ignoring SGLang flags it does not simulate: {' '.join(self.c.unknown_flags)}")
        if self.c.exit_with is not None:
            self._spawn_task(self._exit_with(self.c.exit_with))
        if isinstance(self.log, VllmLogWriter):
            api_server_lines(self.log, self.c)
        else:
            self.log.log(f"server_args={self.c.server_args_repr()}")
            self.log.log("Using default HuggingFace chat template with detected content format: string")
        if not await self._serve_rendezvous():
            return 1
        if not await self._start_ranks():
            return 1
        if isinstance(self.server.memory, VllmSleep) and self.tree.procs:
            self.server.memory.engine_pid = self.tree.procs[0].pid
        if isinstance(self.log, VllmLogWriter):
            return await self._run_vllm(self.log)
        if self.c.node_rank > 0:
            return await self._worker_node()
        self._spawn_task(self.scheduler.run())
        self._spawn_task(self._report_load())
        runner = await self._bind()
        if runner is None:
            self.tree.kill_children()  # launch_server's `finally: kill_process_tree(..., include_parent=False)`
            return 1
        self._spawn_task(self._warmup())
        await asyncio.Event().wait()
        return 0

    async def _run_vllm(self, log: VllmLogWriter) -> int:
        """vLLM: the engine is ready once its script ends; the API server then prints its routes and serves."""
        self._spawn_task(self.scheduler.run())
        self._spawn_task(self._report_load())
        self._spawn_task(StatsLogger(self.c, self.scheduler, log).run())
        routes_lines(log, self.c)
        self.server.status = Status.UP  # the engine warmed up before the API server started: no 503 phase
        runner = await self._bind()
        if runner is None:
            self.tree.kill_children()
            return 1
        await asyncio.Event().wait()
        return 0

    async def _worker_node(self) -> int:
        """A node other than the head (`--node-rank` > 0): its ranks run, it serves no HTTP (as SGLang's
        non-zero node ranks); it ends when one of its ranks does, as their parent does in SGLang."""
        waits = [asyncio.ensure_future(proc.wait()) for proc in self.tree.procs]
        done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        code = next(iter(done)).result()
        self.log.log(f"Scheduler or DataParallelController terminated with {code}")
        self.tree.kill_children()
        return 1

    async def _report_load(self) -> None:
        """Not SGLang behaviour: the simulated `nvidia-smi` reads the load from here (see `sim.gpus`)."""
        while True:
            write_load(len(self.scheduler.running), self.scheduler.model.max_running)
            await asyncio.sleep(LOAD_EVERY_S)

    async def _exit_with(self, pid: int) -> None:
        """Not SGLang behaviour: the demo's simulator follows the demo out, even when the demo was killed."""
        try:
            fd: int | None = os.pidfd_open(pid)  # readable once the process has exited (zombies included)
        except ProcessLookupError:
            fd = None
        except OSError:  # no pidfd (old kernel): poll
            while pid_alive(pid):  # noqa: ASYNC110 - nothing to wait on without a pidfd
                await asyncio.sleep(0.5)
            fd = None
        if fd is not None:
            gone = asyncio.Event()
            asyncio.get_running_loop().add_reader(fd, gone.set)
            await gone.wait()
        self.log.log(f"specdash sim: process {pid} is gone; exiting with the whole tree")
        self.tree.kill_all()


def main(config: SimConfig, warnings: list[str]) -> int:
    """Run the simulator on uvloop when installed (about half the CPU per SSE event)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(SimApp(config, warnings).run())
    return int(uvloop.run(SimApp(config, warnings).run()))
