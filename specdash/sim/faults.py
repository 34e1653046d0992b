"""Fault injection (`--sim-fault`, repeatable) and the exact failure text SGLang prints for each.

- `crash-at-batch=N`: a decode step with more than N running requests (in any mode; in the field it hit
  when `--sim-disable-spec-above`-style dynamic speculation switched off). TP0 prints the scheduler traceback
  ending in the tensor-size RuntimeError and SIGQUITs the launcher, which logs SGLang's SIGQUIT line and
  kills the tree (exit status -9).
- `oom-at-capture`: target CUDA graph capture, at the largest batch size. `Capture cuda graph failed: CUDA
  out of memory...` and the "Possible solutions" list, then the same SIGQUIT path.
- `hang-at=PHASE`: entering PHASE (see HANG_PHASES). Nothing more: the processes stay alive and silent.
- `port-in-use`: uvicorn's bind fails as if the port were busy: the `[Errno 98]` sequence, children
  killed, exit 1.
- `warmup-fail`: the warmup request: `Initialization failed. warmup error: ...[502]`, exit status -9.
- `slow-warmup[=S]`: the warmup's first forward pass takes S seconds more (default 60, scaled like every
  phase): kernels compiled on first use (DeepGEMM, FlashInfer, torch.compile) keep /health at 503 long
  after `Uvicorn running`.
- `slow-health[=S]`: every /health and /health_generate answers after S seconds (default 25); at 20 s or
  more, SGLang's `Health check failed...` line and 503.
- `orphan-ranks`: the TP ranks outlive their launcher and its process group: they leave it (setsid), ignore
  SIGTERM, and the launcher's kill of its tree misses them, so they keep their GPU memory after a stop (what
  engines have left behind after a Slurm kill).
- `slow-node=N[xF]`: the ranks of node N (`--node-rank`) load their weights F times slower (default 10; a
  slow filesystem on one node of a multi-node server); the other nodes wait for them at the next collective
  (`specdash.sim.rendezvous`), as real ranks do.

- `sleep-500`, `sleep-holds-memory`, `wake-404`, `wake-500`, `wake-hangs`, `wake-corrupts`: the memory
  release and resume (`specdash.sim.memory`) fail in each way a real engine has been seen to.

A real busy port behaves exactly like `port-in-use`: the port is never pre-checked, as in SGLang.
"""

from __future__ import annotations

from dataclasses import dataclass

from specdash.errors import UsageError

HANG_PHASES: tuple[str, ...] = (
    "dist-init",
    "weights",
    "kv-cache",
    "cuda-graph",
    "draft-weights",
    "draft-graph",
    "draft-extend-graph",
    "warmup",
)
"""Phases `hang-at=` accepts, in startup order."""

FAULT_HELP: tuple[tuple[str, str], ...] = (
    ("crash-at-batch=N", "a decode step with more than N running requests crashes TP0 (tensor-size RuntimeError)"),
    ("oom-at-capture", "CUDA out of memory in the target CUDA graph capture, then SGLang's SIGQUIT exit"),
    ("hang-at=PHASE", f"stop, alive and silent, on entering PHASE: {', '.join(HANG_PHASES)}"),
    ("port-in-use", "uvicorn's bind fails after the whole load ([Errno 98]), exit 1"),
    ("warmup-fail", "the warmup request fails with a 502, exit status -9"),
    ("slow-warmup[=S]", "the warmup's first forward pass takes S s more (default 60, scaled): a long 503 phase"),
    ("slow-health[=S]", "every health probe answers after S seconds (default 25; from 20 s: 503)"),
    ("orphan-ranks", "the TP ranks outlive their launcher and a kill of its process group, holding their GPUs"),
    ("slow-node=N[xF]", "node rank N loads its weights F times slower (default 10); the other nodes wait for it"),
    ("spec-diverge=N", "greedy output differs from the target's at token N (a lossy verify step)"),
    ("sleep-500", "/release_memory_occupation answers 500 and releases nothing"),
    ("sleep-holds-memory", "/release_memory_occupation answers 200 but the GPUs keep their memory"),
    ("wake-404", "/resume_memory_occupation answers 404"),
    ("wake-500", "/resume_memory_occupation answers 500 (CUDA out of memory)"),
    ("wake-hangs", "/resume_memory_occupation never answers"),
    ("wake-corrupts", "the resume answers 200, then greedy outputs are wrong (weights corrupted)"),
)
"""Every `--sim-fault`, one line each (for `specdash sim --help` and the error for an unknown one)."""


def faults_epilog() -> str:
    """The `--sim-fault` list as `specdash sim --help` prints it."""
    width = max(len(name) for name, _ in FAULT_HELP)
    return "faults (--sim-fault FAULT, repeatable):\n" + "\n".join(
        f"  {name:<{width}}  {text}" for name, text in FAULT_HELP
    )


SGL = "/sgl-workspace/sglang/python/sglang/srt"
"""Source root shown in tracebacks (the path of SGLang's official Docker image)."""


@dataclass(frozen=True)
class Faults:
    """The parsed `--sim-fault` options."""

    crash_at_batch: int | None = None
    """Crash when a decode step runs more than this many requests."""
    oom_at_capture: bool = False
    """Fail the target CUDA graph capture with CUDA OOM."""
    hang_at: str | None = None
    """Stop making progress when entering this phase (one of HANG_PHASES)."""
    port_in_use: bool = False
    """Behave as if uvicorn's bind failed."""
    warmup_fail: bool = False
    """Fail the warmup request with a 502."""
    slow_warmup: float = 0.0
    """Unscaled seconds added to the warmup's first forward pass."""
    slow_health: float | None = None
    """Seconds every health probe takes."""
    orphan_ranks: bool = False
    """The ranks leave the launcher's process group, ignore SIGTERM and are spared by its kill."""
    slow_node: int | None = None
    """This node rank's weight loading is `slow_factor` times slower."""
    slow_factor: float = 10.0
    """How much slower the slow node loads."""
    spec_diverge: int | None = None
    """Speculative modes only: greedy output differs from the target's at this token (a lossy verify bug)."""
    sleep_500: bool = False
    """The memory release answers 500."""
    sleep_holds_memory: bool = False
    """The memory release answers 200 and releases nothing."""
    wake_404: bool = False
    """The resume answers 404."""
    wake_500: bool = False
    """The resume answers 500."""
    wake_hangs: bool = False
    """The resume never answers."""
    wake_corrupts: bool = False
    """The resume succeeds, with corrupted weights."""


_FLAG_FAULTS = (
    "orphan-ranks",
    "sleep-500",
    "sleep-holds-memory",
    "wake-404",
    "wake-500",
    "wake-hangs",
    "wake-corrupts",
)


def parse_faults(specs: list[str]) -> Faults:
    """Parse `--sim-fault` values.

    Raises:
        UsageError: for an unknown fault or a malformed value.
    """
    kw: dict[str, object] = {}
    for spec in specs:
        name, _, value = spec.partition("=")
        try:
            if name == "crash-at-batch":
                kw["crash_at_batch"] = int(value)
            elif name == "oom-at-capture" and not value:
                kw["oom_at_capture"] = True
            elif name == "hang-at" and value in HANG_PHASES:
                kw["hang_at"] = value
            elif name == "port-in-use" and not value:
                kw["port_in_use"] = True
            elif name == "warmup-fail" and not value:
                kw["warmup_fail"] = True
            elif name == "spec-diverge":
                kw["spec_diverge"] = int(value)
                if kw["spec_diverge"] < 0:  # type: ignore[operator]
                    raise ValueError(spec)
            elif name in _FLAG_FAULTS and not value:
                kw[name.replace("-", "_")] = True
            elif name == "slow-warmup":
                kw["slow_warmup"] = float(value) if value else 60.0
                if not 0.0 <= kw["slow_warmup"] < float("inf"):  # type: ignore[operator]
                    raise ValueError(spec)
            elif name == "slow-health":
                kw["slow_health"] = float(value) if value else 25.0
            elif name == "slow-node":
                node, _, factor = value.partition("x")
                kw["slow_node"], kw["slow_factor"] = int(node), float(factor) if factor else 10.0
                if kw["slow_node"] < 0 or not kw["slow_factor"] >= 1.0:  # type: ignore[operator]
                    raise ValueError(spec)
            else:
                raise ValueError(spec)
        except ValueError:
            raise UsageError(
                f"--sim-fault {spec!r}: expected one of {', '.join(name for name, _ in FAULT_HELP)} "
                f"(PHASE: {', '.join(HANG_PHASES)})"
            ) from None
    return Faults(**kw)  # type: ignore[arg-type]


def crash_traceback(spec_v2: bool) -> list[str]:
    """The scheduler traceback of the dynamic-speculation crash (first line gets the TP prefix)."""
    worker = "eagle_worker_v2.py" if spec_v2 else "eagle_worker.py"
    return [
        "Scheduler hit an exception: Traceback (most recent call last):",
        f'  File "{SGL}/managers/scheduler.py", line 2680, in run_scheduler_process',
        "    scheduler.event_loop_normal()",
        '  File "/usr/local/lib/python3.12/dist-packages/torch/utils/_contextlib.py", line 120, in decorate_context',
        "    return func(*args, **kwargs)",
        "           ^^^^^^^^^^^^^^^^^^^^^",
        f'  File "{SGL}/managers/scheduler.py", line 994, in event_loop_normal',
        "    result = self.run_batch(batch)",
        "             ^^^^^^^^^^^^^^^^^^^^^",
        f'  File "{SGL}/managers/scheduler.py", line 2031, in run_batch',
        "    batch_result = self.model_worker.forward_batch_generation(batch_or_worker_batch)",
        "                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        f'  File "{SGL}/speculative/{worker}", line 305, in forward_batch_generation',
        "    self.forward_draft_extend_after_decode(batch)",
        f'  File "{SGL}/speculative/{worker}", line 1004, in forward_draft_extend_after_decode',
        "    forward_batch.spec_info.hidden_states = hidden_states[accept_index]",
        "    ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        "RuntimeError: The size of tensor a (160) must match the size of tensor b (2) at non-singleton dimension 1",
    ]


def oom_capture_traceback(avail_gb: float) -> list[str]:
    """The scheduler traceback of a CUDA OOM during graph capture (`cuda_graph_runner.py` 355)."""
    oom = (
        "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 139.81 GiB of which "
        f"{avail_gb:.2f} GiB is free. Including non-PyTorch memory, this process has 138.61 GiB memory in use. "
        "Of the allocated memory 131.25 GiB is allocated by PyTorch, and 1.92 GiB is reserved by PyTorch but "
        "unallocated. If reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
        "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )
    return [
        "Scheduler hit an exception: Traceback (most recent call last):",
        f'  File "{SGL}/model_executor/cuda_graph_runner.py", line 353, in __init__',
        "    self.capture()",
        f'  File "{SGL}/model_executor/cuda_graph_runner.py", line 468, in capture',
        "    ) = self.capture_one_batch_size(bs, forward, stream_idx)",
        "        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        f"torch.OutOfMemoryError: {oom}",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        f'  File "{SGL}/managers/scheduler.py", line 2668, in run_scheduler_process',
        "    scheduler = Scheduler(",
        "                ^^^^^^^^^^",
        f'  File "{SGL}/managers/scheduler.py", line 311, in __init__',
        "    self.tp_worker = TpModelWorker(",
        "                     ^^^^^^^^^^^^^^",
        f'  File "{SGL}/managers/tp_worker.py", line 237, in __init__',
        "    self._model_runner = ModelRunner(",
        "                         ^^^^^^^^^^^^",
        f'  File "{SGL}/model_executor/model_runner.py", line 323, in __init__',
        "    self.initialize(min_per_gpu_memory)",
        f'  File "{SGL}/model_executor/model_runner.py", line 483, in initialize',
        "    self.init_device_graphs()",
        f'  File "{SGL}/model_executor/model_runner.py", line 2441, in init_device_graphs',
        "    self.graph_runner = graph_runners[self.device](self)",
        "                        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        f'  File "{SGL}/model_executor/cuda_graph_runner.py", line 355, in __init__',
        "    raise Exception(",
        f"Exception: Capture cuda graph failed: {oom}",
        "Possible solutions:",
        "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
        "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)",
        "3. disable torch compile by not using --enable-torch-compile",
        "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)",
        "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose ",
        "",
    ]


def warmup_fail_lines() -> list[str]:
    """`Initialization failed. warmup error:` and its traceback (sglang#2468); the first line gets `[ts]`."""
    return [
        "Initialization failed. warmup error: Traceback (most recent call last):",
        f'  File "{SGL}/entrypoints/http_server.py", line 1617, in _wait_and_warmup',
        '    assert res.status_code == 200, f"{res=}, {res.text=}"',
        "           ^^^^^^^^^^^^^^^^^^^^^^",
        "AssertionError: res=<Response [502]>, res.text=''",
        "",
    ]


def spec_assert_traceback() -> list[str]:
    """What SGLang prints when only some of the three speculative parameters are set."""
    return [
        "Traceback (most recent call last):",
        '  File "<frozen runpy>", line 198, in _run_module_as_main',
        '  File "<frozen runpy>", line 88, in _run_code',
        '  File "/sgl-workspace/sglang/python/sglang/launch_server.py", line 29, in <module>',
        "    server_args = prepare_server_args(sys.argv[1:])",
        "                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        f'  File "{SGL}/server_args.py", line 4036, in prepare_server_args',
        "    return ServerArgs.from_cli_args(raw_args)",
        "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        '  File "<string>", line 330, in __init__',
        f'  File "{SGL}/server_args.py", line 625, in __post_init__',
        "    self._handle_speculative_decoding()",
        f'  File "{SGL}/server_args.py", line 1722, in _handle_speculative_decoding',
        "    assert (",
        "           ^",
        "AssertionError",
    ]


def topk_range_traceback() -> list[str]:
    """What a draft setting asking for more tokens than the tree drafts ends in (`organize_draft_results`)."""
    return [
        "Scheduler hit an exception: Traceback (most recent call last):",
        f'  File "{SGL}/speculative/eagle_worker.py", line 717, in draft_forward',
        "    parent_list, top_scores_index, draft_tokens = organize_draft_results(",
        "                                                  ^^^^^^^^^^^^^^^^^^^^^^^",
        f'  File "{SGL}/speculative/eagle_utils.py", line 27, in organize_draft_results',
        "    top_scores = torch.topk(score_list, num_draft_token - 1, dim=-1)",
        "                 ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        "RuntimeError: selected index k out of range",
    ]
