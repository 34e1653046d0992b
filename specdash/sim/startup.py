"""The per-rank startup script: what each TP scheduler prints, in SGLang's order, and when.

Every rank runs the same script in its own process (`specdash.sim.ranks`). Phase durations come from a
random generator seeded with `--sim-seed` alone, so all ranks agree on when each phase ends (real ranks
meet at collectives); each rank adds a few milliseconds of its own so their lines interleave like real
TP logs. Only rank 0 draws progress bars, and it closes each bar before the other ranks print the
phase's end line, so no `[ts TPn]` line lands in the middle of a bar.

With `--enable-torch-compile` SGLang compiles the model inside the target capture, for every batch size up to
`--torch-compile-max-bs`: no line of its own, the capture bar just crawls over those sizes (which is why the
tracker reads it as capturing, `specdash.engines.sglang`). The compiled artefacts go to a cache dir
(`TORCHINDUCTOR_CACHE_DIR` when set, else `torch_compile/` in the simulator's state dir); a start that finds
this model's entry there compiles in CACHED_COMPILE_SHARE of the time (loading the artefacts).

Order (engines.md 5.2): dist init -> `Load weight begin` -> shard bar -> `Load weight end` -> KV cache ->
`Memory pool end` -> target graph capture (bs counting down) -> for EAGLE/EAGLE3/STANDALONE: draft weights,
draft KV, draft graph (if num_steps > 1), draft-extend graph -> `max_total_num_tokens=...` -> ready.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from specdash.sim.args import SimConfig
from specdash.sim.faults import oom_capture_traceback
from specdash.sim.gpus import TOTAL_MIB, GpuState, gpu_index, pid_alive, state_dir, write_gpu
from specdash.sim.logstyle import LogWriter, capture_bar, shard_bar
from specdash.sim.model import BASELINE_MAX_RUNNING
from specdash.sim.presets import Preset, capture_batch_sizes, choose_preset
from specdash.sim.rendezvous import meet

MIN_PHASE = 0.04
"""Shortest real duration of a phase, whatever the time scale (keeps rank lines ordered, see RankScript)."""
OTHER_MAX = 0.010
"""Latest real offset of another rank's line that precedes a bar."""
BAR_DELAY = 0.015
"""Real seconds after a phase start at which rank 0 draws its bar (after the other ranks' lines)."""
AFTER_BAR = 0.005
"""Extra real delay of the other ranks' lines that follow a bar (after rank 0 closed it)."""
BAR_WAIT_S = 60.0
"""Longest a rank waits for rank 0 to close a bar (then it goes on: a stalled rank 0 must not hang the rest)."""
COMPILE_PER_CAPTURE = 4.0
"""A cold torch.compile of one batch size takes this many times its graph capture."""
CACHED_COMPILE_SHARE = 0.1
"""Share of the cold compile time a start with a warm cache still spends (the advisor's COMPILE_CACHE_SHARE)."""
DRAFT_ARCH = {"EAGLE3": "LlamaForCausalLMEagle3", "EAGLE": "LlamaForCausalLMEagle", "STANDALONE": "LlamaForCausalLM"}


class Clock:
    """Sleeps until `t0 + offset` real seconds (absolute, so the script never drifts)."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0

    def until(self, offset: float) -> None:
        """Sleep until `offset` real seconds after t0 (no-op if already past)."""
        delay = self.t0 + offset - time.time()
        if delay > 0:
            time.sleep(delay)


class BarBarrier:
    """The other ranks print what follows a progress bar only once rank 0 has closed it, as real ranks meet at
    a collective after loading and after each capture. The schedule alone kept that order only while rank 0
    kept up with it: on a loaded machine its 64 shard redraws in a fraction of a second fell behind, and the
    other ranks' next phase landed inside the bar's line. Rank 0 leaves a mark file per closed bar in a
    directory of this simulator (its main process's PID); the others wait for the mark."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.dir = state_dir() / f"bars-{os.getppid()}"
        self.count = 0

    def cross(self) -> None:
        """At a line that follows a bar: rank 0 marks the bar closed, the others wait for that mark."""
        mark = self.dir / str(self.count)
        self.count += 1
        if self.rank == 0:
            if self.count == 1:
                self._sweep_stale()
            self.dir.mkdir(parents=True, exist_ok=True)
            mark.touch()
            return
        end = time.monotonic() + BAR_WAIT_S
        while not mark.exists() and time.monotonic() < end:
            time.sleep(0.002)

    def _sweep_stale(self) -> None:
        # Marks of simulators that have ended (their main process is gone): nobody else removes them.
        for old in self.dir.parent.glob("bars-*"):
            pid = old.name.removeprefix("bars-")
            if pid.isdigit() and not pid_alive(int(pid)):
                shutil.rmtree(old, ignore_errors=True)


def hang_forever() -> NoReturn:
    """`hang-at=PHASE`: stay alive, silent, until killed."""
    while True:
        signal.pause()


def compile_cache_entry(config: SimConfig) -> Path:
    """The file that marks this model's compiled graphs as cached (one per model, TP size and algorithm)."""
    root = Path(config.compile_cache_dir) if config.compile_cache_dir else state_dir() / "torch_compile"
    key = f"{config.model_path}|{config.tp_size}|{config.speculative_algorithm}|{config.torch_compile_max_bs}"
    return root / f"specdash-sim-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def compile_seconds(config: SimConfig, per_bs: float, sizes: list[int], cached: bool) -> list[float]:
    """Unscaled compile seconds per batch size (in `sizes` order): 0 without `--enable-torch-compile`."""
    limit = config.torch_compile_max_bs
    share = CACHED_COMPILE_SHARE if cached else 1.0
    return [per_bs * COMPILE_PER_CAPTURE * share if limit is not None and bs <= limit else 0.0 for bs in sizes]


def total_startup_seconds(config: SimConfig, cached: bool = False) -> float:
    """Unscaled seconds from launch to `fired up` (used by docs and tests)."""
    p = choose_preset(config.model_path, config.tp_size)
    sizes = capture_batch_sizes(config.cuda_graph_max_bs)
    n = len(sizes)
    t = p.pre_s + p.dist_s + 0.5 + p.weights_s + p.kv_s + 1.0
    algo = config.speculative_algorithm
    per_bs = p.verify_graph_per_bs_s if algo else p.graph_per_bs_s
    t += n * per_bs + sum(compile_seconds(config, per_bs, sizes, cached))
    if algo in DRAFT_ARCH:
        t += p.draft_weights_s + 1.0 + n * p.draft_extend_per_bs_s
        if (config.speculative_num_steps or 0) > 1:
            t += n * p.draft_graph_per_bs_s
    return t + 2.0 + p.warmup_s


class RankScript:
    """Runs one rank's startup: prints its lines at the planned times, then returns (ready).

    `self.t` is the real-time cursor (seconds after t0). Each phase lasts its planned duration times the
    time scale, but at least MIN_PHASE, which keeps the ranks' lines ordered around rank 0's bars:
    other ranks print lines that precede a bar up to OTHER_MAX after the cursor, rank 0 starts drawing at
    BAR_DELAY, and other ranks print lines that follow a bar AFTER_BAR later than that.
    """

    def __init__(self, config: SimConfig, rank: int, t0: float, log: LogWriter) -> None:
        self.c = config
        self.rank = rank
        self.log = log
        self.clock = Clock(t0)
        self.p: Preset = choose_preset(config.model_path, config.tp_size)
        self.plan = random.Random(config.seed)  # shared by all ranks: same phase durations everywhere
        self.mine = random.Random(config.seed * 1000 + rank)  # this rank's own jitter
        self.t = 0.0
        self.avail = self.p.gpu_total_gb + self.mine.uniform(-0.05, 0.05)
        self.gpu = gpu_index(rank)
        self.barrier = BarBarrier(rank - config.first_rank)  # rank 0 of this node closes the bars here
        self.compile_entry = compile_cache_entry(config)
        self.compile_cached = config.torch_compile_max_bs is not None and self.compile_entry.exists()

    def report(self, util: float, held_gb: float = 0.0, *, serving: bool = False) -> None:
        """Tell the simulated `nvidia-smi` what this rank's GPU holds (plus `held_gb` not yet in `avail`)."""
        used_gb = max(0.0, self.p.gpu_total_gb - self.avail + held_gb)
        # The GPU's memory.total whatever loads on it; torch's GB (what SGLang prints) are GiB to nvidia-smi.
        write_gpu(GpuState(self.gpu, used_gb * 1024.0, util, serving, os.getppid(), TOTAL_MIB))

    def jit(self, seconds: float) -> float:
        """A planned (unscaled) phase duration with +-10% seeded jitter."""
        return seconds * self.plan.uniform(0.9, 1.1)

    def advance(self, planned: float) -> float:
        """Move the cursor by a planned duration; return the real duration used."""
        real = max(planned * self.c.time_scale, MIN_PHASE)
        self.t += real
        return real

    def say(self, message: str, all_ranks: bool = True, after_bar: bool = False) -> None:
        """Print a line from this rank at the cursor (rank 0 first, the others a little later)."""
        if not all_ranks and self.rank != 0:
            return
        if after_bar and all_ranks:
            self.barrier.cross()
        offset = 0.0
        if self.rank != 0:
            offset = 0.002 + (OTHER_MAX - 0.004) * self.rank / max(1, self.c.tp_size) + self.mine.uniform(0, 0.002)
            if after_bar:
                offset += BAR_DELAY + AFTER_BAR
        elif after_bar:
            offset = BAR_DELAY
        self.clock.until(self.t + offset)
        self.log.log(message, self.rank)

    def meet(self, name: str) -> None:
        """A collective across the nodes (`sim.rendezvous`): wait for the slowest rank, then go on from now."""
        c = self.c
        meet(c.dist_init_addr, name, c.nnodes)
        self.t = max(self.t, time.time() - self.clock.t0)

    def hang_check(self, phase: str) -> None:
        """Stop here for `hang-at=phase`."""
        if self.c.faults.hang_at == phase:
            hang_forever()

    def run(self) -> None:
        """The whole per-rank script."""
        c, p, s26 = self.c, self.p, self.log.style_2026
        self.report(0.0)
        self.advance(self.jit(p.pre_s))
        self.say("Init torch distributed begin.")
        self.hang_check("dist-init")
        self.meet("dist-init")
        dist = self.jit(p.dist_s)
        self.advance(dist)
        self.clock.until(self.t)
        self.log.raw(
            f"[Gloo] Rank {self.rank} is connected to {c.tp_size - 1} peer ranks. "
            f"Expected number of connected peer ranks is : {c.tp_size - 1}\n"
        )
        dist_mem = 0.53 + 0.01 * (self.rank % 3)
        self.avail -= dist_mem
        elapsed = f"elapsed={dist:.2f} s, " if s26 else ""
        self.say(f"Init torch distributed ends. {elapsed}mem usage={dist_mem:.2f} GB")
        self.report(1.0)
        self.advance(0.5)
        self.load_weights(p.architecture, p.weight_gb, self.jit(p.weights_s), p.shards, "weights")
        self.allocate_kv(p.kv_tokens, p.kv_gb, self.jit(p.kv_s), "kv-cache", first=True)
        algo = c.speculative_algorithm
        sizes = capture_batch_sizes(c.cuda_graph_max_bs)
        if algo is None:
            name, per_req, per_bs = "target decode", 1, p.graph_per_bs_s
        else:
            name, per_req, per_bs = "target verify", c.speculative_num_draft_tokens or 1, p.verify_graph_per_bs_s
        compiled = compile_seconds(c, per_bs, sizes, self.compile_cached)
        self.capture("", name, per_req, sizes, per_bs, 1.3, "cuda-graph", oom=c.faults.oom_at_capture, extra=compiled)
        if c.torch_compile_max_bs is not None and self.rank == c.first_rank:  # each node's cache dir
            self.compile_entry.parent.mkdir(parents=True, exist_ok=True)
            self.compile_entry.touch()
        if algo in DRAFT_ARCH:
            draft_tokens = max(1, int(p.kv_tokens * 0.98))
            self.load_weights(DRAFT_ARCH[algo], p.draft_gb, self.jit(p.draft_weights_s), 1, "draft-weights")
            self.allocate_kv(draft_tokens, p.kv_gb * 0.02, 1.0, "", first=False)
            if (c.speculative_num_steps or 0) > 1:
                topk = c.speculative_eagle_topk or 1
                self.capture("draft ", "draft decode", topk, sizes, p.draft_graph_per_bs_s, 0.25, "draft-graph")
            ext_tokens = c.speculative_num_draft_tokens or 1
            self.capture(
                "draft extend ", "draft extend", ext_tokens, sizes, p.draft_extend_per_bs_s, 0.31, "draft-extend-graph"
            )
        self.advance(2.0)
        max_running = c.max_running_requests or BASELINE_MAX_RUNNING
        context = c.context_length or p.context_len
        self.say(
            f"max_total_num_tokens={p.kv_tokens}, chunked_prefill_size=16384, max_prefill_tokens=16384, "
            f"max_running_requests={max_running}, context_len={context}, available_gpu_mem={self.avail:.2f} GB",
            all_ranks=False,
        )
        self.report(0.0, serving=True)  # from here the server's load sets utilisation

    def load_weights(self, arch: str, gb: float, seconds: float, shards: int, phase: str) -> None:
        """`Load weight begin` -> rank 0's shard bar -> `Load weight end` (all ranks)."""
        self.say(f"Load weight begin. avail mem={self.avail:.2f} GB")
        self.hang_check(phase)
        start = self.t
        if phase == "weights" and self.c.faults.slow_node == self.c.node_rank:
            seconds *= self.c.faults.slow_factor
        real = self.advance(seconds)
        # Rank 0 draws the bar and its memory grows shard by shard (reading safetensors keeps the GPU mostly
        # idle); the other ranks report at the phase's end, so that they write nothing into the bar's line.
        if self.rank == 0 and shards > 1:
            for n in range(shards + 1):
                self.clock.until(start + BAR_DELAY + real * n / shards)
                self.report(6.0 + 8.0 * (n % 2), gb * n / shards)
                self.bar(shard_bar(n, shards, seconds * n / shards), newline_style=not self.log.style_2026)
            if self.log.style_2026:
                self.log.raw("\n")
        else:
            self.report(6.0, gb)
        self.avail -= gb
        elapsed = f"elapsed={seconds:.2f} s, " if self.log.style_2026 else ""
        self.say(
            f"Load weight end. {elapsed}type={arch}, dtype=torch.bfloat16, avail mem={self.avail:.2f} GB, "
            f"mem usage={gb:.2f} GB.",
            after_bar=True,
        )

    def allocate_kv(self, tokens: int, gb: float, seconds: float, phase: str, first: bool) -> None:
        """`KV Cache is allocated ...` and `Memory pool end ...`."""
        if first:
            self.say("Using KV cache dtype: torch.bfloat16", all_ranks=False, after_bar=True)
            self.meet("kv-profile")  # the free memory is all-reduced across the ranks before the pool is sized
        if phase:
            self.hang_check(phase)
        self.advance(seconds)
        self.avail -= gb
        dtype = "dtype: torch.bfloat16, " if self.log.style_2026 else ""
        if self.p.mla:
            size = f"KV size: {gb:.2f} GB"
        else:
            size = f"K size: {gb / 2:.2f} GB, V size: {gb / 2:.2f} GB"
        self.say(f"KV Cache is allocated. {dtype}#tokens: {tokens}, {size}")
        self.report(2.0)
        self.say(f"Memory pool end. avail mem={self.avail:.2f} GB")

    def capture(
        self,
        old_name: str,
        new_name: str,
        per_req: int,
        sizes: list[int],
        per_bs: float,
        gb: float,
        phase: str,
        oom: bool = False,
        extra: list[float] | None = None,
    ) -> None:
        """One CUDA graph capture: begin line, rank 0's bs countdown bar, end line on every rank.

        `extra`: seconds added to each batch size (in `sizes` order), torch.compile's share of the capture."""
        s26 = self.log.style_2026
        if s26:
            self.say(
                f"Capture {new_name} CUDA graph begin. backend=full, num_tokens_per_req={per_req}, "
                f"bs={sizes}, avail mem={self.avail:.2f} GB"
            )
        else:
            self.say(
                f"Capture {old_name}cuda graph begin. This can take up to several minutes. "
                f"avail mem={self.avail:.2f} GB"
            )
        self.hang_check(phase)
        self.report(93.0)  # capturing runs the model for every batch size: the GPU is busy
        start = self.t
        added = list(reversed(extra)) if extra else [0.0] * len(sizes)  # the bar counts down from the largest
        planned = [self.jit(per_bs) + added[i] for i in range(len(sizes))]
        total_planned = sum(planned)
        real = self.advance(total_planned)
        total = len(sizes)
        if oom:
            if self.rank != 0:
                hang_forever()  # the other ranks sit in a collective until the launcher kills them
            self.clock.until(start + BAR_DELAY + real * planned[0] / total_planned * 0.6)
            self.bar(capture_bar(sizes[-1], self.avail, 0, total, 0.0), newline_style=False)
            self.log.raw("\n")
            body = oom_capture_traceback(self.avail)
            self.log.lines(body[0], body[1:], self.rank)
            # SGLang's scheduler tells the launcher it failed; the launcher then kills the whole tree.
            os.kill(os.getppid(), signal.SIGQUIT)
            time.sleep(5)
            sys.exit(1)
        done = 0.0
        for i, bs in enumerate(reversed(sizes)):
            if self.rank == 0:
                self.clock.until(start + BAR_DELAY + real * done / total_planned)
                self.bar(capture_bar(bs, self.avail - gb * i / total, i, total, done), newline_style=False)
                self.report(90.0 + 8.0 * (i % 2), gb * i / total)
            done += planned[i]
        if self.rank == 0:
            self.clock.until(self.t + BAR_DELAY)
            self.bar(capture_bar(sizes[0], self.avail - gb, total, total, done), newline_style=False)
            self.log.raw("\n")
        self.avail -= gb
        self.report(4.0)
        if s26:
            self.say(
                f"Capture {new_name} CUDA graph end. elapsed={done:.2f} s, mem usage={gb:.2f} GB, "
                f"avail mem={self.avail:.2f} GB.",
                after_bar=True,
            )
        else:
            self.say(
                f"Capture {old_name}cuda graph end. Time elapsed: {done:.2f} s. mem usage={gb:.2f} GB. "
                f"avail mem={self.avail:.2f} GB.",
                after_bar=True,
            )

    def bar(self, text: str, newline_style: bool) -> None:
        """One progress-bar redraw: its own line (v0.5.6 shard bar) or a `\\r` redraw (tqdm default)."""
        self.log.raw(text + "\n" if newline_style else "\r" + text)


def run_rank(config: SimConfig, rank: int, t0: float, ready: Callable[[], None]) -> None:
    """Run the startup script for `rank`, then call `ready`."""
    log = LogWriter(config.style_2026, config.tp_size)
    RankScript(config, rank, t0, log).run()
    ready()
