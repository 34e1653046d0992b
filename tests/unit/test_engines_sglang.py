"""SGLang's log rules, one variant per test case (engines.md 5.1-5.4, 6.1)."""

from __future__ import annotations

import pytest

from specdash.engines.base import (
    CrashKind,
    CrashSignal,
    HealthState,
    Observation,
    PhaseHint,
    ProgressHint,
    StopHint,
    SuspectHint,
    VersionHint,
)
from specdash.engines.metrics import BatchStats, ServerLimits
from specdash.engines.sglang import SGLangRules, is_rank0
from specdash.phases import Phase, Progress


def observe(*lines: str) -> list[Observation]:
    """All observations of the lines, through one rules object (so per-stream state applies)."""
    rules = SGLangRules()
    out: list[Observation] = []
    for line in lines:
        out += rules.observe(rules.clean(line))
    return out


def phases(*lines: str) -> list[Phase]:
    return [o.phase for o in observe(*lines) if isinstance(o, PhaseHint)]


def batch(line: str) -> BatchStats:
    stats = [o for o in observe(line) if isinstance(o, BatchStats)]
    assert len(stats) == 1, stats
    return stats[0]


# -- prefixes ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "text", "rank", "has_time"),
    [
        ("[2025-10-31 02:15:42 TP1] Load weight end.", "Load weight end.", "TP1", True),
        ("[2025-07-02 07:41:58 DP0 TP0] x", "x", "DP0 TP0", True),
        ("[2026-08-23 09:06:20 TP0 EP0] x", "x", "TP0 EP0", True),
        ("[2025-11-30 11:18:05] INFO:     Started", "Started", "", True),  # uvicorn's level is split off too
        ("[04:40:55 TP0] Decode batch.", "Decode batch.", "TP0", True),
        ("[2025-11-30 11:18:05.123 TP3] x", "x", "TP3", True),
        ("llm0-1  | [2025-11-30 11:18:05 TP0] x", "x", "TP0", True),
        ("\x1b[32m[2025-11-30 11:18:05 TP0] x\x1b[0m", "x", "TP0", True),
        ("[gpu_id=0] Load weight begin. avail mem=78.94 GB", "Load weight begin. avail mem=78.94 GB", "GPU0", False),
        ("[Gloo] Rank 0 is connected to 0 peer ranks.", "[Gloo] Rank 0 is connected to 0 peer ranks.", "", False),
        (
            "Loading safetensors checkpoint shards:  94% Completed",
            "Loading safetensors checkpoint shards:  94% Completed",
            "",
            False,
        ),
        ("", "", "", False),
    ],
)
def test_clean(raw: str, text: str, rank: str, has_time: bool) -> None:
    rules = SGLangRules()
    if raw.startswith("[gpu_id"):
        raw = "[2024-08-01 10:00:00] " + raw
        has_time = True
    line = rules.clean(raw)
    assert line.text == text
    assert line.rank == rank
    assert (line.time is not None) == has_time


def test_timestamps() -> None:
    rules = SGLangRules()
    a = rules.clean("[2025-10-31 02:15:42 TP1] x").time
    b = rules.clean("[2025-10-31 02:15:45.500 TP1] x").time
    assert a is not None and b is not None and b - a == pytest.approx(3.5)
    assert rules.clean("[04:40:55 TP0] x").time == 4 * 3600 + 40 * 60 + 55


@pytest.mark.parametrize(
    ("rank", "zero"), [("", True), ("TP0", True), ("DP0 TP0 EP0", True), ("TP1", False), ("TP10", False)]
)
def test_is_rank0(rank: str, zero: bool) -> None:
    assert is_rank0(rank) is zero


# -- phases -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "phase"),
    [
        ("[2025-12-23 14:18:00] Init torch distributed begin.", Phase.DIST_INIT),
        ("[2026-07-01 10:00:00 TP0] Init torch distributed ends. elapsed=2.1 s, mem usage=0.00 GB", Phase.DIST_INIT),
        ("[gpu_id=0] Init nccl begin.", Phase.DIST_INIT),
        ("[2025-12-23 14:18:01] Load weight begin. avail mem=46.81 GB", Phase.LOADING_WEIGHTS),
        (
            "[2025-10-31 02:15:42 TP1] Load weight end. type=Qwen3MoeForCausalLM, dtype=torch.bfloat16",
            Phase.LOADING_WEIGHTS,
        ),
        (
            "[2025-10-31 02:15:42 TP0] Load weight end. type=Qwen3MoeForCausalLM, dtype=torch.bfloat16",
            Phase.ALLOCATING_KV,
        ),
        ("[2025-10-31 02:15:45 TP0] Using KV cache dtype: torch.bfloat16", Phase.ALLOCATING_KV),
        (
            "[2025-10-31 02:15:46 TP0] KV Cache is allocated. #tokens: 5874221, K size: 67.23 GB, V size: 67.23 GB",
            Phase.ALLOCATING_KV,
        ),
        (
            "[2026-07-01 10:00:00 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 10, K size: 1 GB",
            Phase.ALLOCATING_KV,
        ),
        ("[2025-10-31 02:15:46 TP0] Memory pool end. avail mem=27.30 GB", Phase.ALLOCATING_KV),
        (
            "[2024-12-13 01:44:59 TP0] Capture cuda graph begin. This can take up to several minutes.",
            Phase.CAPTURING_GRAPHS,
        ),
        (
            "[ts] Capture cuda graph begin. This can take up to several minutes. avail mem=14.60 GB",
            Phase.CAPTURING_GRAPHS,
        ),
        (
            "[2025-09-05 20:48:29 TP0] Capture cuda graph end. Time elapsed: 12.11 s. mem usage=0.54 GB.",
            Phase.CAPTURING_GRAPHS,
        ),
        ("[2025-12-01 10:00:00] Capture piecewise CUDA graph begin. avail mem=30 GB", Phase.CAPTURING_GRAPHS),
        (
            "Capturing num tokens (num_tokens=8192 avail_mem=30.00 GB):  10%|█ | 5/50 [00:01<00:09]",
            Phase.CAPTURING_GRAPHS,
        ),
        (
            "[2026-07-01 10:00:00 TP0] Capture target prefill CUDA graph begin. backend=x, num_tokens=[64, 128], "
            "avail mem=9 GB",
            Phase.CAPTURING_GRAPHS,
        ),
        (
            "[2025-09-05 20:50:29 TP6] Capture draft cuda graph end. Time elapsed: 62.67 s.",
            Phase.CAPTURING_DRAFT_GRAPHS,
        ),
        (
            "[2025-09-05 20:50:29 TP0] Capture draft extend cuda graph begin. This can take up to several minutes.",
            Phase.CAPTURING_DRAFT_GRAPHS,
        ),
        (
            "[2026-07-01 10:00:00 TP0] Capture draft decode CUDA graph begin. backend=x, bs=[1, 2], avail mem=9 GB",
            Phase.CAPTURING_DRAFT_GRAPHS,
        ),
        (
            "[2026-07-01 10:00:00 TP0] Capture draft extend CUDA graph end. elapsed=3.0 s, mem usage=0.1 GB, "
            "avail mem=9 GB.",
            Phase.CAPTURING_DRAFT_GRAPHS,
        ),
        ("[2025-11-30 11:18:05] INFO:     Application startup complete.", Phase.WARMING_UP),
        (
            "[2025-11-30 11:18:05] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)",
            Phase.WARMING_UP,
        ),
        ("[2025-11-30 11:18:09] The server is fired up and ready to roll!", Phase.READY),
    ],
)
def test_phase_lines(line: str, phase: Phase) -> None:
    assert phases(line) == [phase]


@pytest.mark.parametrize(
    "line",
    [
        "[2025-11-30 11:18:05] INFO:     Started server process [177326]",
        "[Gloo] Rank 0 is connected to 0 peer ranks. Expected number of connected peer ranks is : 0",
        "[2025-12-23 14:18:00] MOE_RUNNER_BACKEND is not initialized, the backend will be automatically selected",
        "[2025-11-30 11:18:06] Endpoint '/get_model_info' is deprecated and will be removed in a future version.",
        "",
        "   ",
    ],
)
def test_noise_means_nothing(line: str) -> None:
    assert observe(line) == []


def test_second_load_of_a_rank_is_the_draft() -> None:
    got = phases(
        "[2025-12-20 10:00:08 TP0] Load weight begin. avail mem=78 GB",
        "[2025-12-20 10:00:08 TP1] Load weight begin. avail mem=78 GB",
        "[2025-12-20 10:00:29 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16",
        "[2025-12-20 10:00:31 TP0] Capture cuda graph begin.",
        "[2025-12-20 10:00:41 TP0] Load weight begin. avail mem=14 GB",
        "[2025-12-20 10:00:41 TP1] Load weight begin. avail mem=14 GB",
        "[2025-12-20 10:00:43 TP0] KV Cache is allocated. #tokens: 9, K size: 0.5 GB, V size: 0.5 GB",
    )
    assert got == [
        Phase.LOADING_WEIGHTS,
        Phase.LOADING_WEIGHTS,
        Phase.ALLOCATING_KV,
        Phase.CAPTURING_GRAPHS,
        Phase.LOADING_DRAFT,
        Phase.LOADING_DRAFT,
        Phase.LOADING_DRAFT,
    ]


def test_draft_type_marks_the_draft_load() -> None:
    line = (
        "[2025-10-31 02:15:42 TP0] Load weight end. type=LlamaForCausalLMEagle3, dtype=torch.bfloat16, avail mem=1 GB"
    )
    assert phases(line) == [Phase.LOADING_DRAFT]


# -- progress ---------------------------------------------------------------------------------------------


def progress_of(*lines: str) -> list[tuple[Phase, Progress]]:
    return [(o.phase, o.progress) for o in observe(*lines) if isinstance(o, ProgressHint)]


@pytest.mark.parametrize(
    ("line", "done", "total"),
    [
        ("Loading safetensors checkpoint shards:   0% Completed | 0/4 [00:00<?, ?it/s]", 0, 4),
        ("Loading safetensors checkpoint shards:  94% Completed | 15/16 [00:06<00:00,  2.10it/s]", 15, 16),
        ("Loading pt checkpoint shards: 100% Completed | 2/2 [00:01<00:00,  1.50it/s]", 2, 2),
        ("Multi-thread loading shards:  50%|█████     | 2/4 [00:01<00:01,  1.90it/s]", 2, 4),
    ],
)
def test_shard_bar(line: str, done: int, total: int) -> None:
    assert progress_of(line) == [(Phase.LOADING_WEIGHTS, Progress(done, total, "shards"))]


def test_capture_bar_and_draft_bar() -> None:
    got = progress_of(
        "Capturing batches (bs=160 avail_mem=20.00 GB):   2%|▏         | 1/52 [00:01<00:51,  1.00it/s]",
        "Capturing batches (bs=1 avail_mem=37.08 GB): 100%|██████████| 52/52 [00:05<00:00,  9.85it/s]",
        "[t] Capture draft cuda graph begin. This can take up to several minutes. avail mem=12 GB",
        "Capturing batches (bs=4 avail_mem=11.00 GB):  50%|█████     | 2/4 [00:01<00:01,  1.00it/s]",
    )
    assert got == [
        (Phase.CAPTURING_GRAPHS, Progress(1, 52, "batch sizes")),
        (Phase.CAPTURING_GRAPHS, Progress(52, 52, "batch sizes")),
        (Phase.CAPTURING_DRAFT_GRAPHS, Progress(2, 4, "batch sizes")),
    ]


def test_2026_capture_lines_carry_the_batch_size_list() -> None:
    got = progress_of(
        "[2026-07-01 10:00:00 TP0] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, "
        "bs=[1, 2, 4, 8, 16], avail mem=30.00 GB",
        "[2026-07-01 10:00:09 TP0] Capture target decode CUDA graph end. elapsed=9.1 s, mem usage=1 GB, "
        "avail mem=29 GB.",
        "[2026-07-01 10:00:10 TP0] Capture draft decode CUDA graph begin. backend=full, bs=[1, 2, 4], avail mem=29 GB",
    )
    assert got == [
        (Phase.CAPTURING_GRAPHS, Progress(0, 5, "batch sizes")),
        (Phase.CAPTURING_GRAPHS, Progress(5, 5, "batch sizes")),
        (Phase.CAPTURING_DRAFT_GRAPHS, Progress(0, 3, "batch sizes")),
    ]


def test_target_verify_is_a_target_graph() -> None:
    line = "[2026-07-01 10:00:00 TP0] Capture target verify CUDA graph begin. backend=full, bs=[1, 2], avail mem=3 GB"
    assert phases(line) == [Phase.CAPTURING_GRAPHS]


# -- batch lines ------------------------------------------------------------------------------------------


def test_decode_2024() -> None:
    s = batch(
        "[04:40:55 TP0] Decode batch. #running-req: 2, #token: 4078, token usage: 0.00, "
        "gen throughput (token/s): 447.31, #queue-req: 0"
    )
    assert (s.kind, s.running_reqs, s.tokens, s.token_usage, s.gen_throughput, s.queue_reqs) == (
        "decode",
        2,
        4078,
        0.0,
        447.31,
        0,
    )
    assert s.accept_len is None and s.graph is None


def test_prefill_with_cache_hit_rate_2025_03() -> None:
    s = batch(
        "[t TP0] Prefill batch. #new-seq: 1, #new-token: 48, #cached-token: 0, cache hit rate: 12.50%, "
        "token usage: 0.00, #running-req: 0, #queue-req: 0"
    )
    assert (s.kind, s.new_seqs, s.new_tokens, s.cached_tokens, s.cache_hit_rate) == ("prefill", 1, 48, 0, 0.125)


def test_decode_v046_accept_len_no_trailing_comma() -> None:
    s = batch(
        "[t TP0] Decode batch. #running-req: 1, #token: 186, token usage: 0.00, accept len: 2.17, "
        "gen throughput (token/s): 178.86, #queue-req: 0"
    )
    assert (s.accept_len, s.gen_throughput) == (2.17, 178.86)


def test_decode_v053_trailing_comma_accept_rate_graph() -> None:
    s = batch(
        "[2025-10-22 10:27:57 TP0] Decode batch. #running-req: 1, #token: 186, token usage: 0.00, accept len: 1.95, "
        "accept rate: 0.49, cuda graph: True, gen throughput (token/s): 178.86, #queue-req: 0, "
    )
    assert (s.accept_len, s.accept_rate, s.graph, s.gen_throughput, s.queue_reqs) == (1.95, 0.49, True, 178.86, 0)


def test_v056_comma_forms() -> None:
    p = batch(
        "[2025-12-20 10:00:00 TP0] Prefill batch, #new-seq: 3, #new-token: 900, #cached-token: 12, "
        "token usage: 0.01, #running-req: 2, #queue-req: 5, "
    )
    assert (p.kind, p.new_seqs, p.running_reqs, p.queue_reqs, p.token_usage) == ("prefill", 3, 2, 5, 0.01)
    d = batch(
        "[2025-12-20 10:00:00 TP0] Decode batch, #running-req: 48, #token: 20000, token usage: 0.22, accept len: 3.10, "
        "accept rate: 0.78, cuda graph: False, gen throughput (token/s): 2512.34, #queue-req: 7, "
    )
    assert (d.running_reqs, d.queue_reqs, d.accept_len, d.graph, d.gen_throughput) == (48, 7, 3.1, False, 2512.34)


def test_forward_iter_form() -> None:
    s = batch(
        "[t TP0] Decode batch [1234], #running-req: 1, #token: 10, token usage: 0.00, cuda graph: True, "
        "gen throughput (token/s): 99.00, #queue-req: 0, "
    )
    assert (s.forward_iter, s.running_reqs, s.gen_throughput) == (1234, 1, 99.0)


def test_2026_hybrid_swa_prefill_and_decode() -> None:
    p = batch(
        "[2026-08-23 09:06:20 TP0 EP0] Prefill batch, #new-seq: 1, #new-token: 2304, #cached-token: 0, "
        "full token usage: 0.02, swa token usage: 0.01, #running-req: 0, #queue-req: 0, #pending-token: 0, "
        "cuda graph: False, input throughput (token/s): 49004.48"
    )
    assert (p.token_usage, p.swa_token_usage, p.pending_tokens, p.graph, p.input_throughput) == (
        0.02,
        0.01,
        0,
        False,
        49004.48,
    )
    d = batch(
        "[2026-08-23 09:06:22 TP0 EP0] Decode batch, #running-req: 1, #full token: 166400, full token usage: 0.02, "
        "#swa token: 768, swa token usage: 0.00, accept len: 4.42, accept rate: 0.69, cuda graph: True, "
        "gen throughput (token/s): 140.78, #queue-req: 0"
    )
    assert (d.tokens, d.token_usage, d.swa_tokens, d.accept_len, d.gen_throughput, d.queue_reqs) == (
        166400,
        0.02,
        768,
        4.42,
        140.78,
        0,
    )


def test_dspark_and_npu_fields() -> None:
    s = batch(
        "[t TP0] Decode batch, #running-req: 2, #token: 5, token usage: 0.00, accept len: 2.50, cap len: 4.00, "
        "block accept len: 3.90, npu graph: True, gen throughput (token/s): 10.00, #queue-req: 1"
    )
    assert (s.accept_len, s.graph, s.queue_reqs) == (2.5, True, 1)


@pytest.mark.parametrize(
    ("line", "version"),
    [
        ("[t TP0] Decode batch. #running-req: 1, #queue-req: 0, ", "<=0.5.4"),
        ("[t TP0] Decode batch, #running-req: 1, #queue-req: 0, ", ">=0.5.5, before 2026-01-30"),
        ("[t TP0] Decode batch, #running-req: 1, #queue-req: 0", ">=2026-01-30"),
        ("[t TP0] Load weight end. elapsed=3.1 s, type=X, dtype=torch.bfloat16, avail mem=1 GB", ">=2026-01-26"),
        ("[t TP0] Capture target decode CUDA graph begin. backend=full, bs=[1], avail mem=3 GB", ">=2026-06-22"),
    ],
)
def test_version_hints(line: str, version: str) -> None:
    hints = [o for o in observe(line) if isinstance(o, VersionHint)]
    assert len(hints) == 1 and hints[0].version.startswith(version)


def test_version_hint_once_per_stream() -> None:
    line = "[t TP0] Decode batch, #running-req: 1, #queue-req: 0"
    assert sum(isinstance(o, VersionHint) for o in observe(line, line, line)) == 1


def test_limits_line() -> None:
    got = [
        o
        for o in observe(
            "[2025-11-30 11:18:05] max_total_num_tokens=2261377, chunked_prefill_size=16384, max_prefill_tokens=16384, "
            "max_running_requests=48, context_len=128000, available_gpu_mem=37.06 GB"
        )
        if isinstance(o, ServerLimits)
    ]
    assert got == [ServerLimits(2261377, 48, 128000, 16384, 16384)]


# -- crash signals ----------------------------------------------------------------------------------------


def crash_kinds(line: str) -> list[tuple[CrashKind, str]]:
    return [(o.kind, o.text) for o in observe(line) if isinstance(o, CrashSignal)]


@pytest.mark.parametrize(
    ("line", "kind", "text"),
    [
        (
            "[2025-04-16 14:22:53] Received sigquit from a child process. It usually means the child failed.",
            CrashKind.MARKER,
            "Received sigquit",
        ),
        (
            "[t] SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
            CrashKind.MARKER,
            "SIGQUIT",
        ),
        (
            "[t] Rank 0 scheduler is dead. Please check if there are relevant logs.",
            CrashKind.MARKER,
            "scheduler is dead",
        ),
        ("[t] Initialization failed. Please see the error messages above.", CrashKind.MARKER, "Initialization failed"),
        (
            "[t] Subprocess scheduler_0 (pid=42) crashed with exit code -9. Triggering SIGQUIT for cleanup...",
            CrashKind.MARKER,
            "crashed with exit code",
        ),
        (
            "[t] Rank 0 scheduler died during initialization (exit code: -9). If exit code is -9 (SIGKILL), a common",
            CrashKind.FATAL,
            "died during initialization",
        ),
        (
            "[t TP0] Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB",
            CrashKind.FATAL,
            "CUDA out",
        ),
        (
            "[2025-11-30 11:18:05] ERROR:    [Errno 98] error while attempting to bind on address "
            "('127.0.0.1', 30000): address already in use",
            CrashKind.FATAL,
            "address already in use",
        ),
        ("Killed", CrashKind.MARKER, "Killed"),
    ],
)
def test_crash_markers(line: str, kind: CrashKind, text: str) -> None:
    got = [(k, t) for k, t in crash_kinds(line) if k is kind]
    assert len(got) == 1 and text in got[0][1]


def test_scheduler_exception_opens_a_traceback() -> None:
    got = crash_kinds("[2025-03-29 18:18:34 TP0] Scheduler hit an exception: Traceback (most recent call last):")
    assert [k for k, _ in got] == [CrashKind.TRACEBACK, CrashKind.MARKER]
    assert got[1][1] == "Scheduler hit an exception"


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: 0.9",
        "AssertionError: res=<Response [502]>, res.text=''",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.",
        "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
        "AssertionError",
    ],
)
def test_exception_lines(line: str) -> None:
    assert CrashKind.EXCEPTION in [k for k, _ in crash_kinds(line)]


@pytest.mark.parametrize(
    "line",
    [
        '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 1999, in run_scheduler_process',
        "    raise RuntimeError('x')",
        "FutureWarning: `torch.cuda.amp.autocast(args...)` is deprecated.",
        "[t] Error rate is 0.0 percent",
        "[t] The error was recovered: RuntimeError",
    ],
)
def test_not_exception_lines(line: str) -> None:
    assert CrashKind.EXCEPTION not in [k for k, _ in crash_kinds(line)]


def test_keyboard_interrupt_is_a_stop_not_a_crash() -> None:
    assert crash_kinds("KeyboardInterrupt") == []
    assert [o for o in observe("KeyboardInterrupt") if isinstance(o, StopHint)] == [StopHint("SIGINT")]


def test_not_enough_memory_is_exception_and_fatal() -> None:
    kinds = [
        k for k, _ in crash_kinds("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.")
    ]
    assert kinds == [CrashKind.EXCEPTION, CrashKind.FATAL]


def test_negative_profiled_value_is_suspect() -> None:
    got = observe(
        "[2025-07-02 07:41:59 DP0 TP0] max_total_tokens=131072 is larger than the profiled value -561981. "
        "Use the profiled value instead."
    )
    assert any(isinstance(o, SuspectHint) for o in got)


# -- health -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "ready", "state"),
    [
        (None, False, HealthState.LOADING),
        (503, False, HealthState.WARMING_UP),
        (200, False, HealthState.READY),
        (503, True, HealthState.UNHEALTHY),
        (200, True, HealthState.READY),
        (404, False, HealthState.UNKNOWN),
    ],
)
def test_health(status: int | None, ready: bool, state: HealthState) -> None:
    assert SGLangRules.health_state(status, ready=ready) is state
