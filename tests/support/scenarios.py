"""Event scripts for the dashboard's main states, shared by the pilot and snapshot tests."""

from __future__ import annotations

from dataclasses import replace

from specdash.config import ModeConfig
from specdash.core.events import (
    BenchTick,
    BenchUpdate,
    GpuSample,
    GpuStats,
    LevelRow,
    ModeInfo,
    ModesChanged,
    ServerStatus,
)
from specdash.core.spec_export import policy_markdown
from specdash.core.verdict import verdict
from specdash.errors import SpecdashError
from specdash.phases import CrashInfo, Phase, Progress
from specdash.remote.events import Connected, Lost, Reconnecting
from specdash.slo import LevelSlo, TargetResult, goodput_curve, max_concurrency_meeting, parse_slo
from tests.support.fake_session import Event
from tests.support.log_batches import RawLog

NOW = 1_700_000_000.0
"""The fixed clock every UI test uses."""

HOST = "gpu-box"

MODES = ModesChanged(
    modes=(
        ModeInfo("baseline", "sglang", "Llama-3.1-8B, no speculation"),
        ModeInfo("eagle3", "sglang", "EAGLE-3 draft, 3 steps"),
        ModeInfo("vllm-eagle", "vllm", "vLLM EAGLE, 4 tokens"),
    ),
)
RUNNING_EAGLE3 = ModesChanged(MODES.modes, current="eagle3")

EARLY = ((Phase.LAUNCHING, 1.6), (Phase.DIST_INIT, 7.9))

STOPPED = ServerStatus(Phase.STOPPED)

LOADING = ServerStatus(
    Phase.LOADING_WEIGHTS,
    mode="eagle3",
    engine="sglang",
    pid=1234,
    port=30000,
    started_at=NOW - 52,
    phase_started_at=NOW - 42,
    progress=Progress(29, 64, "shard"),
    timeline=EARLY,
)
CAPTURING = ServerStatus(
    Phase.CAPTURING_GRAPHS,
    mode="eagle3",
    engine="sglang",
    pid=1234,
    port=30000,
    started_at=NOW - 131,
    phase_started_at=NOW - 14,
    progress=Progress(12, 36, "batch sizes"),
    timeline=(*EARLY, (Phase.LOADING_WEIGHTS, 96.2), (Phase.ALLOCATING_KV, 3.4)),
    eta_remaining=125.0,
    eta_samples=5,
    eta_spread=20.0,
)
READY = ServerStatus(
    Phase.READY,
    mode="eagle3",
    engine="sglang",
    pid=1234,
    port=30000,
    started_at=NOW - 3725,
    timeline=(
        *EARLY,
        (Phase.LOADING_WEIGHTS, 96.2),
        (Phase.ALLOCATING_KV, 3.4),
        (Phase.CAPTURING_GRAPHS, 41.0),
        (Phase.WARMING_UP, 2.2),
    ),
)
CRASH_REASON = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
CRASHED = ServerStatus(
    Phase.CRASHED,
    mode="eagle3",
    engine="sglang",
    pid=None,
    port=30000,
    started_at=NOW - 70,
    timeline=(*EARLY, (Phase.LOADING_WEIGHTS, 58.0)),
    crash=CrashInfo(CRASH_REASON, ("Traceback ...",)),
)

STARTUP_LINES = (
    "[2025-04-16 14:21:40] server_args=ServerArgs(model_path='meta-llama/Llama-3.1-8B-Instruct', tp_size=4)",
    "[2025-04-16 14:21:42 TP0] Init torch distributed begin.",
    "[2025-04-16 14:21:42 TP1] Init torch distributed begin.",
    "[2025-04-16 14:21:49 TP0] Load weight begin. avail mem=78.50 GB",
    "\x1b[33m[2025-04-16 14:21:50] WARNING  fused_moe.py:12: Using default MoE config.\x1b[0m",
    *(
        f"Loading safetensors checkpoint shards:  {round(i / 64 * 100)}% Completed | {i}/64 [00:{i:02d}<00:30]"
        for i in range(1, 30)
    ),
)
READY_LINES = (
    "[2025-04-16 14:23:30 TP0] Capture cuda graph end. Time elapsed: 41.02 s. mem usage=2.10 GB.",
    "[2025-04-16 14:23:31] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)",
    "[2025-04-16 14:23:33] The server is fired up and ready to roll!",
    "[2025-04-16 14:24:02 TP0] Decode batch. #running-req: 10, #token: 5120, gen throughput (token/s): 1714.22",
)
CRASH_LINES = (
    "[2025-04-16 14:22:53 TP3] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/sglang/srt/managers/scheduler.py", line 1999, in run_scheduler_process',
    "    scheduler.event_loop_overlap()",
    '  File "/sglang/srt/model_executor/model_runner.py", line 312, in load_model',
    "    self.model = get_model(...)",
    CRASH_REASON,
    "[2025-04-16 14:22:53] Received sigquit from a child process. It usually means the child failed.",
)
_run = RawLog()  # one run's tracker: the startup, then its ready lines (a session reads them in one run)
STARTUP_LOG, READY_LOG = _run.batch(STARTUP_LINES), _run.batch(READY_LINES)
_crashed = RawLog()  # the same startup, then the crash
_crashed.classify(STARTUP_LINES)
CRASH_LOG = _crashed.batch(CRASH_LINES)

ROWS = (
    LevelRow("baseline", 1, "done", 152.0, 151.0, 38.0, 6.5, 64, 0, 150.2),
    LevelRow("baseline", 5, "done", 690.0, 140.0, 52.0, 7.0, 64, 0, 688.0),
    LevelRow("baseline", 20, "done", 2210.0, 112.0, 140.0, 8.9, 64, 0, 2205.0),
    LevelRow("eagle3", 1, "done", 371.0, 370.0, 41.0, 2.7, 64, 0, 369.0, 3.21),
    LevelRow("eagle3", 5, "done", 1402.0, 281.0, 60.0, 3.5, 64, 0, 1398.0, 3.05),
    LevelRow(
        "eagle3",
        20,
        "running",
        1905.0,
        None,
        170.0,
        None,
        31,
        0,
        2180.0,
        2.61,
        warning="client and server disagree by 14 %",
    ),
)
EAGLE3_ARGS = ("--speculative-algorithm", "EAGLE3", *("--speculative-num-steps", "3", "--speculative-eagle-topk", "1"))
EAGLE3_MODE = ModeConfig(
    "eagle3",
    "sglang",
    "meta-llama/Llama-3.1-8B-Instruct",
    args=(*EAGLE3_ARGS, *("--speculative-num-draft-tokens", "4")),
)
"""The demo's eagle3 mode as configured (the policy's flags are its own)."""
_CURVES = {"baseline": ((1, 152.0), (5, 690.0), (20, 2210.0)), "eagle3": ((1, 371.0), (5, 1402.0), (20, 1905.0))}
BENCH = BenchUpdate(
    rows=ROWS,
    curves=_CURVES,
    crossover=12.5,
    crossover_text="eagle3 wins up to C=12.5; baseline above",
    running=True,
    policy=policy_markdown({m: dict(p) for m, p in _CURVES.items()}, {"eagle3": EAGLE3_MODE}),
)
TICKS = tuple(
    BenchTick("eagle3", c, t / 4, level * (1 - 0.6 * 0.9**t), min(64, t), 64)
    for c, level in ((5, 1402.0), (20, 1960.0))
    for t in range(1, 60)
)
GPUS = GpuStats(tuple(GpuSample(i, 87.0 + i, 61_000 + 800 * i, 81_559, 310.0 + 7 * i) for i in range(4)))


def stopped() -> list[Event]:
    return [MODES, Connected(HOST, 1), STOPPED]


def loading() -> list[Event]:
    return [RUNNING_EAGLE3, Connected(HOST, 1), LOADING, STARTUP_LOG]


def capturing() -> list[Event]:
    return [RUNNING_EAGLE3, Connected(HOST, 1), CAPTURING, STARTUP_LOG, GPUS]


def ready_with_bench() -> list[Event]:
    return [RUNNING_EAGLE3, Connected(HOST, 1), READY, STARTUP_LOG, READY_LOG, GPUS, BENCH, *TICKS]


def crashed() -> list[Event]:
    return [MODES, Connected(HOST, 1), CRASHED, STARTUP_LOG, CRASH_LOG]


def reconnecting() -> list[Event]:
    return [
        RUNNING_EAGLE3,
        Connected(HOST, 1),
        READY,
        STARTUP_LOG,
        READY_LOG,
        Lost(HOST, "Keepalive timeout"),
        Reconnecting(HOST, 2, 4.0, "Connection refused"),
    ]


REFUSED = SpecdashError("port 30000 on gpu-box is busy (pid 999 python3); stop it or pick another port")


SLO = parse_slo("ttft_p90=500ms,tpot_p90=50ms")


def _judged(row: LevelRow, good: int, ttft_share: float, tpot_share: float) -> LevelRow:
    """`row` judged against `SLO`: `good` of its 64 requests within both limits, over a 20 s level."""
    ttft, tpot = SLO.targets
    targets = (TargetResult(ttft, ttft_share, 300.0), TargetResult(tpot, tpot_share, 40.0))
    return replace(row, slo=LevelSlo(row.concurrency, 64, good, good * 256, 20.0, targets))


SLO_ROWS = (
    _judged(ROWS[0], 64, 1.0, 1.0),
    _judged(ROWS[1], 62, 1.0, 0.97),
    _judged(ROWS[2], 40, 0.7, 0.8),
    _judged(ROWS[3], 64, 1.0, 1.0),
    _judged(ROWS[4], 59, 0.95, 0.93),
    _judged(replace(ROWS[5], status="done"), 20, 0.5, 0.4),
)


def bench_with_slo() -> BenchUpdate:
    """The A/B above judged against `SLO`, with the session's own verdict (`core.verdict`) of it."""
    curves = {m: dict(points) for m, points in BENCH.curves.items()}
    judged = {m: [r.slo for r in SLO_ROWS if r.mode == m and r.slo is not None] for m in curves}
    text = verdict(
        curves,
        slo_text=SLO.text,
        capacity={m: max_concurrency_meeting(v) for m, v in judged.items()},
        goodput={m: goodput_curve(v) for m, v in judged.items()},
    )
    return replace(BENCH, rows=SLO_ROWS, crossover_text=text, running=False)


def ready_with_slo() -> list[Event]:
    return [RUNNING_EAGLE3, Connected(HOST, 1), READY, STARTUP_LOG, READY_LOG, GPUS, bench_with_slo()]


NOTES_ROWS = tuple(
    replace(row, status="done", warning=warning)
    for row, warning in zip(
        ROWS,
        (
            "client-limited: the probe's CPU was busy 97 % of the level",
            "server caps running requests at 4 (--max-running-requests)",
            "client and server disagree by 14 %",
            "",
            "2 requests failed: HTTP 503 Service Unavailable",
            "client and server disagree by 14 %",
        ),
        strict=True,
    )
)


def ready_with_many_notes() -> list[Event]:
    """A finished A/B whose levels carry more warnings than the sweep page has rows for (at 80x24)."""
    bench = replace(BENCH, rows=NOTES_ROWS, running=False)
    return [RUNNING_EAGLE3, Connected(HOST, 1), READY, STARTUP_LOG, READY_LOG, bench, *TICKS]


MANY_LEVELS = (1, 2, 4, 6, 8, 10, 12, 16, 20, 24, 32, 48)
"""An A/B over 12 levels: more than any table at 80x24 has rows for."""


def _base_tok_s(c: int) -> float:
    return float(150.0 * c**0.85)


def _eagle_tok_s(c: int) -> float:
    return float(370.0 * c**0.57)


def many_levels_ab(running: int) -> BenchUpdate:
    """The A/B over `MANY_LEVELS` with baseline finished and eagle3 running its level number `running` (0-based),
    the levels before it done, those after it pending; the reference (baseline) first in the curves."""
    base = tuple(
        LevelRow("baseline", c, "done", _base_tok_s(c), ok=64, server_tok_s=_base_tok_s(c)) for c in MANY_LEVELS
    )
    eagle = tuple(
        LevelRow(
            "eagle3",
            c,
            "done" if i < running else "running" if i == running else "pending",
            _eagle_tok_s(c) if i <= running else None,
            ok=64 if i < running else 0,
            accept_length=3.2 - 0.05 * i if i <= running else None,
        )
        for i, c in enumerate(MANY_LEVELS)
    )
    curves = {
        "baseline": tuple((r.concurrency, r.tok_s) for r in base if r.tok_s is not None),
        "eagle3": tuple((r.concurrency, r.tok_s) for r in eagle if r.status == "done" and r.tok_s is not None),
    }
    return BenchUpdate(rows=base + eagle, curves=curves, running=True)
