"""vLLM's log rules, one variant per test case (engines.md 5.5-5.7, 6.2), plus shared cleaning and detection."""

# Log lines stay whole, one per row, so they can be compared with (and grepped in) the real logs.
# ruff: noqa: E501

from __future__ import annotations

from typing import Any, TypeVar

import pytest

from specdash.engines.base import CrashKind, CrashSignal, HealthState, Observation, PhaseHint, ProgressHint, VersionHint
from specdash.engines.metrics import EngineStats, ServerLimits, SpecDecodeStats
from specdash.engines.registry import detect_engine, make_rules
from specdash.engines.text import bar_counts, strip_ansi, unwrap
from specdash.engines.vllm import VLLM_STARTUP_ORDER, VLLMRules
from specdash.phases import Phase, Progress

T = TypeVar("T")


def observe(*lines: str) -> list[Observation]:
    rules = VLLMRules()
    out: list[Observation] = []
    for line in lines:
        out += rules.observe(rules.clean(line))
    return out


def phases(*lines: str) -> list[Phase]:
    return [o.phase for o in observe(*lines) if isinstance(o, PhaseHint | ProgressHint)]


def one(kind: type[T], line: str) -> T:
    got = [o for o in observe(line) if isinstance(o, kind)]
    assert len(got) == 1, got
    return got[0]


# -- prefixes ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "text", "rank", "level", "has_time"),
    [
        ("(APIServer pid=5759) INFO 11-29 12:57:47 [loggers.py:335] Engine 000: x", "Engine 000: x", "APIServer", "INFO", True),
        (
            "(EngineCore_DP0 pid=2039425) ERROR 09-18 10:17:06 [core.py:712]   File \"/x.py\", line 1",
            '  File "/x.py", line 1',
            "EngineCore_DP0",
            "ERROR",
            True,
        ),
        ("EngineCore_DP0 pid=2039425) ERROR 09-18 10:17:06 [core.py:712] EngineCore failed to start.", "EngineCore failed to start.", "EngineCore_DP0", "ERROR", True),
        ("(Worker_TP1 pid=530) ERROR 10-06 18:54:30 [v1/executor/multiproc_executor.py:597] WorkerProc failed to start.", "WorkerProc failed to start.", "Worker_TP1", "ERROR", True),
        ("(VllmWorker rank=2 pid=77) INFO 06-01 10:00:00 [a.py:1] hi", "hi", "VllmWorker rank=2", "INFO", True),
        ("(VllmWorker-0 pid=5) WARNING 06-01 10:00:00 [a.py:1] hi", "hi", "VllmWorker-0", "WARNING", True),
        ("(Worker_TP1_EP1 pid=9) INFO 06-01 10:00:00.123 [a.py:1] hi", "hi", "Worker_TP1_EP1", "INFO", True),
        ("(APIServer pid=17943) INFO  127.0.0.1:53300 \"POST /v1/completions HTTP/1.1\" 200 OK", "127.0.0.1:53300 \"POST /v1/completions HTTP/1.1\" 200 OK", "APIServer", "INFO", False),
        ("^[[0;36m(APIServer pid=31)^[[0;0m INFO 02-03 19:00:05 [launcher.py:38] Available routes are:", "Available routes are:", "APIServer", "INFO", True),
        ("\x1b[0;36m(APIServer pid=31)\x1b[0;0m INFO 02-03 19:00:05 [launcher.py:38] Available routes are:", "Available routes are:", "APIServer", "INFO", True),
        ("vllm-1  | (APIServer pid=31) INFO 02-03 19:00:05 [launcher.py:38] Available routes are:", "Available routes are:", "APIServer", "INFO", True),
        ("INFO 11-29 12:58:09 [launcher.py:254] [shutdown] API server: shutdown triggered", "[shutdown] API server: shutdown triggered", "", "INFO", True),
        ("INFO:     Started server process [5759]", "Started server process [5759]", "", "INFO", False),
        ("(EngineCore_DP0 pid=169514) ", "", "EngineCore_DP0", "", False),
    ],
)  # fmt: skip
def test_clean(raw: str, text: str, rank: str, level: str, has_time: bool) -> None:
    line = VLLMRules().clean(raw)
    assert (line.text, line.rank, line.level, line.time is not None) == (text, rank, level, has_time)


def test_clock_has_no_year_but_differences_work() -> None:
    rules = VLLMRules()
    a = rules.clean("(A pid=1) INFO 02-28 23:59:59 [a.py:1] x").time
    b = rules.clean("(A pid=1) INFO 02-29 00:00:01 [a.py:1] x").time
    assert a is not None and b is not None and b - a == 2


# -- phases -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "phase"),
    [
        ("(EngineCore_DP0 pid=1) INFO 05-24 10:00:12 [parallel_state.py:1208] world_size=1 rank=0 local_rank=0 distributed_init_method=tcp://127.0.0.1:4 backend=nccl", Phase.DIST_INIT),
        ("(EngineCore_DP0 pid=1) INFO 05-24 10:00:14 [gpu_model_runner.py:2600] Starting to load model meta-llama/Llama-3.1-8B...", Phase.LOADING_WEIGHTS),
        ("(EngineCore_DP0 pid=169514) INFO 11-18 14:37:42 [default_loader.py:267] Loading weights took 12.81 seconds", Phase.LOADING_WEIGHTS),
        ("(Worker pid=1) INFO 10-06 18:54:30 [gpu_model_runner.py:2650] Loading drafter model...", Phase.LOADING_DRAFT),
        ("(EngineCore_DP0 pid=1) INFO 10-21 09:11:57 [gpu_worker.py:298] Available KV cache memory: 16.23 GiB", Phase.ALLOCATING_KV),
        ("(EngineCore pid=1) INFO 11-29 12:00:00 [kv_cache_utils.py:1] CPU KV cache size: 1,048,576 tokens, Maximum concurrency for 2,048 tokens per request: 512.00x", Phase.ALLOCATING_KV),
        ("(EngineCore pid=1) INFO 11-29 12:00:00 [cpu_worker.py:1] Explicitly set (1.0/9.09) GiB for KV cache on node 0.", Phase.ALLOCATING_KV),
        ("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  50%|█████     | 33/67 [00:02<00:02, 15.18it/s]", Phase.CAPTURING_GRAPHS),
        ("(EngineCore pid=1) INFO 11-29 12:00:00 [cpu_model_runner.py:1] Warming up model for the compilation...", Phase.ALLOCATING_KV),
        ("(EngineCore_DP0 pid=1) INFO 10-21 09:12:04 [gpu_model_runner.py:3480] Graph capturing finished in 7 secs, took 0.95 GiB", Phase.CAPTURING_GRAPHS),
        ("(EngineCore_DP0 pid=1) INFO 10-21 09:12:04 [core.py:210] init engine (profile, create kv cache, warmup model) took 25.99 seconds", Phase.WARMING_UP),
        ("(EngineCore_DP0 pid=1) INFO 05-24 10:00:58 [core.py:210] init engine (profile, create kv cache, warmup model) took 147.31 s (compilation: 79.95 s)", Phase.WARMING_UP),
        ("(APIServer pid=1) INFO 05-24 10:01:00 [api_server.py:1] Supported tasks: ['generate']", Phase.WARMING_UP),
        ("(APIServer pid=31) INFO 02-03 19:00:05 [api_server.py:946] Starting vLLM API server 0 on http://0.0.0.0:8000", Phase.READY),
        ("(APIServer pid=1) INFO 11-29 12:00:00 [entry.py:140] Starting vLLM server on http://127.0.0.1:18000", Phase.WARMING_UP),
        ("(APIServer pid=1) INFO 11-29 12:00:00 [entry.py:140] Starting v<HOST> server on http://127.0.0.1:18000", Phase.WARMING_UP),
        ("(APIServer pid=31) INFO 02-03 19:00:05 [launcher.py:46] Route: /health, Methods: GET", Phase.WARMING_UP),
        ("INFO:     Waiting for application startup.", Phase.WARMING_UP),
        ("INFO:     Application startup complete.", Phase.READY),
    ],
)  # fmt: skip
def test_phase_lines(line: str, phase: Phase) -> None:
    assert phases(line) == [phase]


def test_order_puts_the_drafter_before_the_kv_cache() -> None:
    assert VLLM_STARTUP_ORDER.index(Phase.LOADING_DRAFT) < VLLM_STARTUP_ORDER.index(Phase.ALLOCATING_KV)
    assert Phase.CAPTURING_DRAFT_GRAPHS not in VLLM_STARTUP_ORDER


def test_shard_bar_after_drafter_is_draft_progress() -> None:
    got = [
        (o.phase, o.progress)
        for o in observe(
            "Loading safetensors checkpoint shards:  35% Completed | 6/17 [00:04<00:08,  1.27it/s]",
            "(Worker pid=1) INFO 10-06 18:54:30 [gpu_model_runner.py:2650] Loading drafter model...",
            "Loading safetensors checkpoint shards (eager): 100% Completed | 1/1 [00:00<00:00,  1.27it/s]",
            "Capturing CUDA graphs (decode, FULL): 100%|██████████| 35/35 [00:01<00:00, 17.82it/s]",
        )
        if isinstance(o, ProgressHint)
    ]
    assert got == [
        (Phase.LOADING_WEIGHTS, Progress(6, 17, "shards")),
        (Phase.LOADING_DRAFT, Progress(1, 1, "shards")),
        (Phase.CAPTURING_GRAPHS, Progress(35, 35, "graphs")),
    ]


def test_kv_capacity() -> None:
    got = [
        o
        for o in observe(
            "(EngineCore pid=1) INFO 11-29 12:00:00 [kv.py:1] CPU KV cache size: 1,048,576 tokens, "
            "Maximum concurrency for 2,048 tokens per request: 512.00x"
        )
        if isinstance(o, ServerLimits)
    ]
    assert got == [ServerLimits(max_total_tokens=1048576, max_concurrency=512.0)]


# -- versions ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "version"),
    [
        ("(APIServer pid=1) INFO 06-19 15:35:00 [api_utils.py:339]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.23.0", "0.23.0"),
        ("INFO 03-01 10:00:00 [api_server.py:1] vLLM API server version 0.8.5.post1", "0.8.5.post1"),
        ("(APIServer pid=1) INFO 06-19 15:35:00 [a.py:1] vLLM server version 0.32.0, serving model Qwen/Qwen3-8B", "0.32.0"),
        ("(EngineCore_DP0 pid=1) INFO 09-18 10:00:00 [core.py:1] Initializing a V1 LLM engine (v0.10.2) with config: x", "0.10.2"),
    ],
)  # fmt: skip
def test_versions(line: str, version: str) -> None:
    assert one(VersionHint, line) == VersionHint(version, exact=True)


# -- stats lines ------------------------------------------------------------------------------------------


def test_stats_2025_engine_000() -> None:
    s = one(
        EngineStats,
        "(APIServer pid=17943) INFO  09-09 05:27:57 [loggers.py:123] Engine 000: Avg prompt throughput: 5.1 tokens/s, "
        "Avg generation throughput: 12.2 tokens/s, Running: 2 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, "
        "Prefix cache hit rate: 0.0%",
    )
    assert s == EngineStats(0, 5.1, 12.2, 2, 0, 0.0, 0.0, None)


def test_stats_0320_cpu() -> None:
    s = one(
        EngineStats,
        "(APIServer pid=5759) INFO 11-29 12:57:47 [loggers.py:335] Engine 000: Avg prompt throughput: 233.6 tokens/s, "
        "Avg generation throughput: 405.5 tokens/s, Running: 16 reqs, Waiting: 3 reqs, CPU KV cache usage: 6.3%, "
        "Prefix cache hit rate: 50.0%",
    )
    assert (s.gen_throughput, s.running_reqs, s.waiting_reqs, s.prefix_cache_hit_rate) == (405.5, 16, 3, 0.5)
    assert s.kv_cache_usage == pytest.approx(0.063)


def test_stats_with_preemptions_and_engine_index() -> None:
    s = one(
        EngineStats,
        "(APIServer pid=1) INFO 05-24 10:00:00 [loggers.py:1] Engine 001: Avg prompt throughput: 0.0 tokens/s, "
        "Avg generation throughput: 99.0 tokens/s, Running: 64 reqs, Waiting: 12 reqs, GPU KV cache usage: 99.1%, "
        "Prefix cache hit rate: 0.0%, Preemptions: 4",
    )
    assert (s.engine, s.preemptions, s.waiting_reqs) == (1, 4, 12)


def test_stats_early_v1_without_engine_index() -> None:
    s = one(
        EngineStats,
        "INFO 03-01 10:00:00 [loggers.py:80] Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 "
        "tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, Prefix cache hit rate: 0.0%",
    )
    assert (s.engine, s.prompt_throughput, s.gen_throughput, s.kv_cache_usage) == (0, 1.0, 2.0, 0.01)


def test_stats_v0() -> None:
    s = one(
        EngineStats,
        "INFO 10-01 10:00:00 metrics.py:341] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 30.1 "
        "tokens/s, Running: 3 reqs, Swapped: 0 reqs, Pending: 2 reqs, GPU KV cache usage: 1.5%, CPU KV cache usage: 0.0%.",
    )
    assert (s.running_reqs, s.waiting_reqs, s.kv_cache_usage) == (3, 2, 0.015)


def test_spec_2026() -> None:
    s = one(
        SpecDecodeStats,
        "(APIServer pid=1) INFO 11-29 12:57:47 [metrics.py:1] SpecDecoding metrics: Mean acceptance length: 3.71, "
        "Accepted throughput: 90.84 tokens/s, Drafted throughput: 120.96 tokens/s, Accepted: 992 tokens, Drafted: "
        "1321 tokens, Per-position acceptance rate: 0.880, 0.743, 0.585, 0.503, Avg Draft acceptance rate: 75.1%",
    )
    assert s.mean_acceptance_length == 3.71
    assert (s.accepted_throughput, s.drafted_throughput, s.accepted_tokens, s.drafted_tokens) == (
        90.84,
        120.96,
        992,
        1321,
    )
    assert s.per_position == (0.88, 0.743, 0.585, 0.503)
    assert s.draft_acceptance_rate == pytest.approx(0.751)


def test_spec_2025_09() -> None:
    s = one(
        SpecDecodeStats,
        "SpecDecoding metrics: Draft acceptance rate: 88.8%, Mean acceptance length: 5.44, Accepted throughput: 4.37 "
        "tokens/s, Drafted throughput: 4.92 tokens/s, Accepted: 262 tokens, Drafted: 295 tokens, Per-position "
        "acceptance rate: 0.983, 0.949, 0.915, 0.881, 0.712",
    )
    assert (s.mean_acceptance_length, s.accepted_tokens, s.drafted_tokens) == (5.44, 262, 295)
    assert s.per_position == (0.983, 0.949, 0.915, 0.881, 0.712)
    assert s.draft_acceptance_rate == pytest.approx(0.888)


def test_spec_2025_04() -> None:
    s = one(
        SpecDecodeStats, "SpecDecoding metrics: Draft acceptance rate: 100.0%, Accepted: 66 tokens, Drafted: 66 tokens"
    )
    assert (s.draft_acceptance_rate, s.accepted_tokens, s.drafted_tokens, s.mean_acceptance_length) == (
        1.0,
        66,
        66,
        None,
    )


def test_spec_v0() -> None:
    s = one(
        SpecDecodeStats,
        "INFO 10-01 10:00:00 metrics.py:1] Speculative metrics: Draft acceptance rate: 0.642, System efficiency: 0.598, "
        "Number of speculative tokens: 3, Number of accepted tokens: 8547, Number of draft tokens: 13311, Number of "
        "emitted tokens: 10616.",
    )
    assert (s.draft_acceptance_rate, s.system_efficiency, s.accepted_tokens, s.drafted_tokens) == (
        0.642,
        0.598,
        8547,
        13311,
    )


# -- crash signals ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("(EngineCore_DP0 pid=2039425) ERROR 09-18 10:17:06 [core.py:712] EngineCore failed to start.", CrashKind.MARKER),
        ("(Worker_TP1 pid=530) ERROR 10-06 18:54:30 [v1/executor/multiproc_executor.py:597] WorkerProc failed to start.", CrashKind.MARKER),
        ("(APIServer pid=1) ERROR 10-06 18:54:31 [a.py:1] RuntimeError: Engine core initialization failed. See root cause above.", CrashKind.FATAL),
        ("(EngineCore_DP0 pid=1) ERROR 10-06 18:54:30 [core.py:712] ValueError: Free memory on device cuda:0 (22.35/23.56 GiB) on startup is less than desired GPU memory utilization (0.95, 22.38 GiB).", CrashKind.FATAL),
        ("OSError: [Errno 98] Address already in use", CrashKind.FATAL),
        ("(EngineCore_DP0 pid=1) ERROR 09-18 10:17:06 [core.py:712] Traceback (most recent call last):", CrashKind.TRACEBACK),
        ("(EngineCore_DP0 pid=1) ERROR 09-18 10:17:06 [core.py:712] torch.OutOfMemoryError: CUDA out of memory.", CrashKind.EXCEPTION),
    ],
)  # fmt: skip
def test_crash_signals(line: str, kind: CrashKind) -> None:
    assert kind in [o.kind for o in observe(line) if isinstance(o, CrashSignal)]


@pytest.mark.parametrize(
    ("status", "state"),
    [(None, HealthState.LOADING), (200, HealthState.READY), (503, HealthState.DEAD), (500, HealthState.UNKNOWN)],
)
def test_health(status: int | None, state: HealthState) -> None:
    assert VLLMRules.health_state(status, ready=False) is state


# -- shared helpers ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("\x1b[0;36m(APIServer pid=31)\x1b[0;0m INFO", "(APIServer pid=31) INFO"),
        ("^[[0;36m(APIServer pid=31)^[[0;0m INFO", "(APIServer pid=31) INFO"),
        ("\x1b]0;title\x07text", "text"),
        ("[0;36m(APIServer pid=31)[0;0m INFO", "(APIServer pid=31) INFO"),  # the paste lost the ESC
        ("[2025-11-30 11:18:05 TP0] x", "[2025-11-30 11:18:05 TP0] x"),
        ("plain", "plain"),
    ],
)
def test_strip_ansi(raw: str, clean: str) -> None:
    assert strip_ansi(raw) == clean


@pytest.mark.parametrize(
    ("raw", "clean", "tag"),
    [
        ("llm0-1  | [2025-11-30 11:18:05] x", "[2025-11-30 11:18:05] x", ""),
        ("sglang_1  | x", "x", ""),
        ("vllm  | (APIServer pid=1) INFO x", "INFO x", "APIServer"),
        ("2026-03-22T13:53:37.123456789Z [2026-03-22 13:53:37 TP0] Decode batch", "[2026-03-22 13:53:37 TP0] Decode batch", ""),
        ("2026-03-22T13:53:37+00:00 sglang-0  | x", "x", ""),
        ("(SGLangEngine pid=41820) [2026-03-22 13:53:37 TP0] y", "[2026-03-22 13:53:37 TP0] y", "SGLangEngine"),
        ("(RayWorkerWrapper pid=7, ip=10.0.0.2) INFO z", "INFO z", "RayWorkerWrapper"),
        ("(VllmWorker rank=2 pid=11) ERROR w", "ERROR w", "VllmWorker rank=2"),
        ("EngineCore_DP0 pid=2039425) ERROR v", "ERROR v", "EngineCore_DP0"),
        ("> > [2025-11-30 11:18:05] quoted", "[2025-11-30 11:18:05] quoted", ""),
        ("    Traceback (most recent call last):", "Traceback (most recent call last):", ""),
        ("RuntimeError: x\r", "RuntimeError: x", ""),
        ("^C(EngineCore pid=3) INFO u", "INFO u", "EngineCore"),
        ("Started server process pid=12) x", "Started server process pid=12) x", ""),
        ("Loading safetensors checkpoint shards:  94% Completed | 15/16", "Loading safetensors checkpoint shards:  94% Completed | 15/16", ""),
        ("Capturing batches (bs=1 avail_mem=37.08 GB): 100%|██| 52/52", "Capturing batches (bs=1 avail_mem=37.08 GB): 100%|██| 52/52", ""),
        ("| a | b |", "| a | b |", ""),
    ],
)  # fmt: skip
def test_unwrap(raw: str, clean: str, tag: str) -> None:
    assert unwrap(raw) == (clean, tag)


@pytest.mark.parametrize(
    ("text", "counts"),
    [
        ("x:  94% Completed | 15/16 [00:06<00:00,  2.10it/s]", (15, 16)),
        ("x: 100%|██████████| 52/52 [00:05<00:00,  9.85it/s]", (52, 52)),
        ("x:   0%|          | 0/4 [00:00<?, ?it/s]", (0, 4)),
        ("x: | 5/4 [", None),
        ("no bar 1/2", None),
    ],
)
def test_bar_counts(text: str, counts: tuple[int, int] | None) -> None:
    assert bar_counts(text) == counts


@pytest.mark.parametrize(
    ("lines", "engine"),
    [
        (["[2025-10-31 02:15:42 TP1] Load weight end. type=X"], "sglang"),
        (["(APIServer pid=1) INFO 06-19 15:35:00 [a.py:1] x"], "vllm"),
        (["Loading safetensors checkpoint shards:  29% Completed | 5/17", "(EngineCore_DP0 pid=1) INFO x"], "vllm"),
        (
            ["INFO 07-24 03:57:31 model_runner.py:266] x", "Registering 4515 cuda graph addresses"],
            "vllm",
        ),  # V0's prefix shape
        (["(SGLangEngine pid=41820) [2026-03-22 13:53:37 TP0] Decode batch, #running-req: 6"], "sglang"),  # Ray
        (["INFO:     Started server process [11912]"], "unknown"),  # uvicorn's: any engine's
        (["nothing useful"], "unknown"),
        ([], "unknown"),
    ],
)
def test_detect_engine(lines: list[str], engine: str) -> None:
    assert detect_engine(lines) == engine


def test_registry_is_the_only_list_of_engines() -> None:
    """Every engine module is found (each defines RULES); the helpers are not engines."""
    from specdash.engines import registry

    assert registry.names() == ("sglang", "vllm")
    for name in registry.names():
        rules = registry.get(name)
        assert rules.name == name and rules.launch_module and rules.model_flag and rules.ready_lines
    assert make_rules("unknown").name == "unknown"


@pytest.mark.parametrize(
    ("info", "models", "engine"),
    [
        ({"internal_states": [{}], "version": "0.5.6"}, None, "sglang"),
        (None, {"data": [{"id": "m", "owned_by": "sglang"}]}, "sglang"),
        (None, {"object": "list", "data": [{"id": "m", "owned_by": "vllm"}]}, "vllm"),
        (None, {"data": [{"id": "m", "owned_by": "someone"}]}, ""),
        (None, None, ""),
        ({"version": "x"}, {"data": "garbage"}, ""),
    ],
)
def test_identify_from_server_answers(info: dict[str, Any] | None, models: dict[str, Any] | None, engine: str) -> None:
    from specdash.engines.registry import identify

    assert identify(info, models) == engine


def test_make_rules_rejects_unknown_engine() -> None:
    with pytest.raises(KeyError):
        make_rules("tgi")
