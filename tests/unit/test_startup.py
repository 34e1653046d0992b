"""The startup tracker: forward-only phases and progress, the crash rule, health, stuck timeouts, clocks."""

from __future__ import annotations

from pathlib import Path

import pytest

from specdash.core.startup import _EXCERPT_LINE_CHARS, StartupTracker
from specdash.core.startup_events import (
    Crashed,
    Exited,
    MetricsSeen,
    PhaseChanged,
    ProgressChanged,
    Ready,
    Serving,
    StartupEvent,
    Stuck,
    Suspect,
)
from specdash.core.stuck import DEFAULT_STUCK_TIMEOUTS
from specdash.core.timeline import Outcome, Timeline
from specdash.engines.metrics import BatchStats
from specdash.limits import MAX_LOG_LINE_CHARS
from specdash.phases import SETTLED, STARTUP_ORDER, Phase, Progress

LOGS = Path(__file__).parent.parent / "fixtures" / "logs"
SGLANG_READY = (LOGS / "synthetic" / "sglang_v056_eagle3_tp2_ready.log").read_text()
VLLM_READY = (LOGS / "synthetic" / "vllm_0320_eagle3_ready.log").read_text()


def phase_changes(events: list[StartupEvent]) -> list[Phase]:
    return [e.phase for e in events if isinstance(e, PhaseChanged)]


def crashes(events: list[StartupEvent]) -> list[Crashed]:
    return [e for e in events if isinstance(e, Crashed)]


def feed_lines(tracker: StartupTracker, *lines: str, now: float | None = None) -> list[StartupEvent]:
    return tracker.feed("".join(line + "\n" for line in lines), now)


# -- full startups ----------------------------------------------------------------------------------------


def test_sglang_full_startup_in_order() -> None:
    tracker = StartupTracker("sglang")
    events = tracker.feed(SGLANG_READY)
    assert phase_changes(events) == [
        Phase.DIST_INIT,
        Phase.LOADING_WEIGHTS,
        Phase.ALLOCATING_KV,
        Phase.CAPTURING_GRAPHS,
        Phase.LOADING_DRAFT,
        Phase.CAPTURING_DRAFT_GRAPHS,
        Phase.WARMING_UP,
        Phase.READY,
    ]
    ready = [e for e in events if isinstance(e, Ready)]
    assert len(ready) == 1 and "fired up" in ready[0].line
    assert tracker.phase is Phase.READY and not crashes(events)
    decode = [e.metrics for e in events if isinstance(e, MetricsSeen) and isinstance(e.metrics, BatchStats)]
    assert decode[-1].accept_len == 3.1


def test_sglang_application_startup_complete_is_not_ready() -> None:
    tracker = StartupTracker("sglang")
    events = feed_lines(tracker, "[2025-11-30 11:18:05] INFO:     Application startup complete.")
    assert phase_changes(events) == [Phase.WARMING_UP]
    assert tracker.phase is Phase.WARMING_UP


def test_vllm_full_startup_in_order() -> None:
    tracker = StartupTracker("vllm")
    events = tracker.feed(VLLM_READY)
    assert phase_changes(events) == [
        Phase.DIST_INIT,
        Phase.LOADING_WEIGHTS,
        Phase.LOADING_DRAFT,
        Phase.COMPILING,
        Phase.ALLOCATING_KV,
        Phase.CAPTURING_GRAPHS,
        Phase.WARMING_UP,
        Phase.READY,
    ]
    assert any(isinstance(e, Ready) for e in events)


# -- forward only -----------------------------------------------------------------------------------------


def test_never_moves_backwards() -> None:
    tracker = StartupTracker("sglang")
    events = feed_lines(
        tracker,
        "[2025-10-31 02:15:46 TP0] KV Cache is allocated. #tokens: 5, K size: 1 GB, V size: 1 GB",
        "[2025-10-31 02:15:40 TP1] Load weight begin. avail mem=1 GB",
        "[2025-10-31 02:15:40 TP1] Init torch distributed begin.",
    )
    assert phase_changes(events) == [Phase.ALLOCATING_KV]
    assert tracker.phase is Phase.ALLOCATING_KV


def test_progress_never_decreases_within_a_phase() -> None:
    tracker = StartupTracker("sglang")
    events = feed_lines(
        tracker,
        "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:01<00:01]",
        "Loading safetensors checkpoint shards:  25% Completed | 1/4 [00:01<00:01]",
        "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:01<00:01]",
        "Loading safetensors checkpoint shards:  75% Completed | 3/4 [00:01<00:01]",
    )
    got = [e.progress for e in events if isinstance(e, ProgressChanged)]
    assert got == [Progress(2, 4, "shards"), Progress(3, 4, "shards")]
    assert tracker.progress == Progress(3, 4, "shards")


def test_progress_of_a_past_phase_is_ignored() -> None:
    tracker = StartupTracker("sglang")
    events = feed_lines(
        tracker,
        "[2025-10-31 02:15:42 TP0] Load weight end. type=X, dtype=torch.bfloat16",
        "Loading safetensors checkpoint shards: 100% Completed | 16/16 [00:07<00:00]",
    )
    assert phase_changes(events) == [Phase.ALLOCATING_KV]
    assert not any(isinstance(e, ProgressChanged) for e in events)


def test_shard_bar_redrawn_with_carriage_returns_in_pieces() -> None:
    tracker = StartupTracker("sglang")
    frames = "".join(
        f"Loading safetensors checkpoint shards: {25 * i:3d}% Completed | {i}/4 [00:0{i}<00:00]\r" for i in range(5)
    )
    events: list[StartupEvent] = []
    for start in range(0, len(frames), 7):  # a stream cut anywhere
        events += tracker.feed(frames[start : start + 7], now=float(start))
    events += tracker.finish(now=1000.0)
    assert [e.progress.done for e in events if isinstance(e, ProgressChanged)] == [0, 1, 2, 3, 4]


def test_bytes_split_inside_a_utf8_character() -> None:
    tracker = StartupTracker("sglang")
    data = "Capturing batches (bs=1 avail_mem=37.08 GB): 100%|██████████| 52/52 [00:05<00:00]\n".encode()
    cut = data.index("█".encode()) + 1
    events = tracker.feed(data[:cut], now=1.0) + tracker.feed(data[cut:], now=2.0)
    assert [e.progress for e in events if isinstance(e, ProgressChanged)] == [Progress(52, 52, "batch sizes")]
    assert tracker.internal_errors == 0


# -- crashes ----------------------------------------------------------------------------------------------

SCHEDULER_OOM = [
    "[2025-03-29 18:18:34 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 1999, in run_scheduler_process',
    "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)",
    '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 1746, in init_memory_pool',
    "    raise RuntimeError(",
    "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: 0.5",
    "",
    "[2025-03-29 18:18:34] Received sigquit from a child process. It usually means the child failed.",
]


def test_scheduler_exception_crash_names_the_exception() -> None:
    tracker = StartupTracker("sglang")
    events = feed_lines(tracker, "[2025-03-29 18:18:00 TP0] Load weight begin. avail mem=9 GB", *SCHEDULER_OOM)
    (crash,) = crashes(events)
    assert crash.info.reason.startswith("RuntimeError: Not enough memory")
    assert crash.phase is Phase.LOADING_WEIGHTS
    assert crash.info.excerpt[0].startswith("[2025-03-29 18:18:00 TP0] Load weight begin")
    assert any("Scheduler hit an exception" in line for line in crash.info.excerpt)
    assert tracker.phase is Phase.CRASHED and tracker.highest is Phase.LOADING_WEIGHTS


def test_the_crash_excerpt_cuts_a_huge_line_and_keeps_its_length() -> None:
    """A line of megabytes (cut into pieces by the follower) costs the excerpt a few kilobytes, not all of it."""
    tracker = StartupTracker("sglang")
    huge = "x" * 256 * 1024
    events = feed_lines(tracker, *[huge] * 120, *SCHEDULER_OOM)
    (crash,) = crashes(events)
    assert crash.info.reason.startswith("RuntimeError: Not enough memory")
    kept = [line for line in crash.info.excerpt if line.startswith("xxx")]
    # `feed` cuts a line at MAX_LOG_LINE_CHARS as the follower does; the excerpt keeps each piece's length
    rest = f"({MAX_LOG_LINE_CHARS - _EXCERPT_LINE_CHARS:,} more characters)"
    assert kept and all(len(line) < 5_000 and line.endswith(rest) for line in kept)


def test_harmless_traceback_is_only_suspect() -> None:
    tracker = StartupTracker("sglang")
    events = feed_lines(
        tracker,
        "[2025-12-23 14:18:01] Load weight begin. avail mem=46.81 GB",
        "Traceback (most recent call last):",
        '  File "/x/sglang/srt/models/registry.py", line 12, in import_model_classes',
        "ModuleNotFoundError: No module named 'mindspore'",
        "Loading safetensors checkpoint shards:  25% Completed | 1/4 [00:00<00:01,  2.32it/s]",
        "[2025-12-23 14:18:30] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=30 GB",
    )
    assert not crashes(events)
    assert [e.reason for e in events if isinstance(e, Suspect)] == ["ModuleNotFoundError: No module named 'mindspore'"]
    assert phase_changes(events) == [Phase.LOADING_WEIGHTS, Phase.ALLOCATING_KV]
    assert not crashes(tracker.tick(now=1e12) + tracker.finish())


def test_old_harmless_exception_does_not_name_a_later_crash() -> None:
    tracker = StartupTracker("sglang")
    events = feed_lines(
        tracker,
        "Traceback (most recent call last):",
        "ModuleNotFoundError: No module named 'mindspore'",
        *SCHEDULER_OOM[:3],  # a new traceback starts, cut before its exception line
    )
    assert not crashes(events)
    events = tracker.finish()
    (crash,) = crashes(events)
    assert crash.info.reason == "Scheduler hit an exception"


def test_marker_after_a_finished_traceback_crashes_at_once() -> None:
    tracker = StartupTracker("sglang")
    events = feed_lines(
        tracker,
        "Traceback (most recent call last):",
        '  File "/x.py", line 1, in <module>',
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        "[2025-12-01 10:00:00] Rank 0 scheduler is dead. Please check if there are relevant logs.",
    )
    (crash,) = crashes(events)
    assert crash.info.reason.startswith("torch.OutOfMemoryError")


def test_pending_marker_crashes_after_grace() -> None:
    tracker = StartupTracker("sglang", crash_grace=5.0)
    line = "[2025-04-16 14:22:53] Received sigquit from a child process. It usually means the child failed."
    assert not crashes(feed_lines(tracker, line, now=100.0))
    assert tracker.tick(now=102.0) == []
    (crash,) = crashes(tracker.tick(now=105.5))
    assert "Received sigquit" in crash.info.reason
    assert crash.at == 105.5


def test_most_specific_marker_names_the_crash() -> None:
    tracker = StartupTracker("sglang")
    feed_lines(
        tracker,
        "[2025-04-16 14:22:53] Received sigquit from a child process. It usually means the child failed.",
        "[2025-04-16 14:22:53 TP3] Scheduler hit an exception: Traceback (most recent call last):",
    )
    (crash,) = crashes(tracker.finish())
    assert crash.info.reason == "Scheduler hit an exception"


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (
            "[2025-11-30 11:18:05] ERROR:    [Errno 98] error while attempting to bind on address "
            "('127.0.0.1', 30000): address already in use",
            "address already in use",
        ),
        ("[2025-12-01 10:00:00 TP0] Capture cuda graph failed: CUDA out of memory.", "Capture cuda graph failed"),
        (
            "[2026-07-01 10:00:00] Rank 0 scheduler died during initialization (exit code: -9). If exit code is -9",
            "died during initialization",
        ),
    ],
)
def test_fatal_lines_crash_at_once(line: str, reason: str) -> None:
    tracker = StartupTracker("sglang")
    events = feed_lines(tracker, "[2025-11-30 11:18:05] INFO:     Application startup complete.", line)
    (crash,) = crashes(events)
    assert reason in crash.info.reason
    assert crash.phase is Phase.WARMING_UP


def test_vllm_enginecore_failure_names_the_root_cause() -> None:
    prefix = "(EngineCore_DP0 pid=2039425) ERROR 09-18 10:17:06 [core.py:712] "
    tracker = StartupTracker("vllm")
    events = feed_lines(
        tracker,
        prefix + "EngineCore failed to start.",
        prefix + "Traceback (most recent call last):",
        prefix + '  File "/home/x/vllm/vllm/v1/engine/core.py", line 703, in run_engine_core',
        prefix + "ValueError: Free memory on device cuda:0 (22.35/23.56 GiB) on startup is less than desired GPU "
        "memory utilization (0.95, 22.38 GiB).",
        "(APIServer pid=1) ERROR 09-18 10:17:07 [a.py:1] RuntimeError: Engine core initialization failed. "
        "See root cause above. Failed core proc(s): {}",
    )
    (crash,) = crashes(events)
    assert crash.info.reason.startswith("ValueError: Free memory on device")


def test_nothing_after_a_crash_but_metrics() -> None:
    tracker = StartupTracker("sglang")
    feed_lines(tracker, *SCHEDULER_OOM)
    events = feed_lines(
        tracker,
        "[2025-12-01 10:00:00] The server is fired up and ready to roll!",
        "[2025-12-01 10:00:00 TP0] Decode batch, #running-req: 1, #queue-req: 0",
        *SCHEDULER_OOM,
    )
    assert not [e for e in events if isinstance(e, PhaseChanged | ProgressChanged | Ready | Crashed)]
    assert [type(e) for e in events if isinstance(e, MetricsSeen)] == [MetricsSeen]
    assert tracker.phase is Phase.CRASHED
    # The batch line still proves the server had been serving: ready was reached, the crash stays.
    assert [e.alive for e in events if isinstance(e, Serving)] == [False]
    assert tracker.highest is Phase.READY and tracker.decision.outcome is Outcome.CRASHED


def test_crash_after_ready() -> None:
    tracker = StartupTracker("sglang")
    tracker.feed(SGLANG_READY)
    events = feed_lines(
        tracker,
        "[2026-08-01 10:00:00] SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
        "[2026-08-01 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
    )
    (crash,) = crashes(events)
    assert crash.phase is Phase.READY and crash.info.reason.startswith("RuntimeError: NCCL error")


# -- process exit -----------------------------------------------------------------------------------------


def test_exit_before_ready_is_a_crash() -> None:
    tracker = StartupTracker("sglang", started_at=0.0)
    feed_lines(tracker, "[2025-12-23 14:18:01] Load weight begin. avail mem=46.81 GB", now=1.0)
    (crash,) = crashes(tracker.process_exited(-9, at=2.0))
    assert crash.exit_code == -9
    assert crash.info.reason == "process exited with code -9 while loading weights"


def test_exit_with_pending_marker_uses_the_marker() -> None:
    tracker = StartupTracker("vllm")
    feed_lines(
        tracker, "(EngineCore_DP0 pid=1) ERROR 09-18 10:17:06 [core.py:712] EngineCore failed to start.", now=1.0
    )
    (crash,) = crashes(tracker.process_exited(1, at=2.0))
    assert crash.info.reason == "EngineCore failed to start."


@pytest.mark.parametrize(("code", "kind"), [(0, Exited), (-15, Exited), (143, Exited), (1, Crashed), (-9, Crashed)])
def test_exit_after_ready(code: int, kind: type) -> None:
    tracker = StartupTracker("vllm")
    tracker.feed(VLLM_READY)
    events = tracker.process_exited(code, at=1e12)
    assert [type(e) for e in events] == [kind]
    assert tracker.process_exited(code, at=1e12 + 1) == []


# -- health -----------------------------------------------------------------------------------------------


def test_sglang_health_sequence() -> None:
    tracker = StartupTracker("sglang", started_at=0.0)
    assert tracker.health(None, at=1.0) == []
    assert phase_changes(tracker.health(503, at=2.0)) == [Phase.WARMING_UP]
    events = tracker.health(200, at=3.0)
    assert phase_changes(events) == [Phase.READY]
    assert any(isinstance(e, Ready) for e in events)
    suspects = tracker.health(503, at=4.0) + tracker.health(503, at=5.0)
    assert len([e for e in suspects if isinstance(e, Suspect)]) == 1
    assert tracker.phase is Phase.READY


def test_vllm_503_is_a_dead_engine() -> None:
    tracker = StartupTracker("vllm", started_at=0.0)
    tracker.health(200, at=1.0)
    (crash,) = crashes(tracker.health(503, at=2.0))
    assert "503" in crash.info.reason


# -- stuck ------------------------------------------------------------------------------------------------


def test_stuck_once_per_phase_and_progress_resets_the_clock() -> None:
    tracker = StartupTracker("sglang", started_at=0.0, stuck_timeouts={Phase.LOADING_WEIGHTS: 60.0})
    feed_lines(tracker, "[2025-12-23 14:18:01] Load weight begin. avail mem=46.81 GB", now=10.0)
    assert tracker.tick(now=50.0) == []
    feed_lines(tracker, "Loading safetensors checkpoint shards:  25% Completed | 1/4 [00:00<00:01]", now=60.0)
    assert tracker.tick(now=110.0) == []
    (stuck,) = tracker.tick(now=121.0)
    assert isinstance(stuck, Stuck)
    assert (stuck.phase, stuck.since, stuck.timeout) == (Phase.LOADING_WEIGHTS, 60.0, 60.0)
    assert "loading weights" in stuck.reason
    assert tracker.tick(now=500.0) == []


def test_stuck_in_launching_without_any_line() -> None:
    tracker = StartupTracker("vllm", started_at=0.0)
    (stuck,) = tracker.tick(now=DEFAULT_STUCK_TIMEOUTS[Phase.LAUNCHING] + 1)
    assert isinstance(stuck, Stuck) and stuck.phase is Phase.LAUNCHING


def test_no_stuck_when_ready() -> None:
    tracker = StartupTracker("sglang", started_at=0.0)
    tracker.health(200, at=1.0)
    assert tracker.tick(now=1e9) == []


# -- clocks -----------------------------------------------------------------------------------------------


def test_injected_clock_wins_over_log_time() -> None:
    tracker = StartupTracker("sglang")
    (event,) = feed_lines(tracker, "[2025-12-23 14:18:00] Init torch distributed begin.", now=42.0)
    assert isinstance(event, PhaseChanged) and event.at == 42.0


def test_log_clock_never_goes_back() -> None:
    tracker = StartupTracker("sglang")
    events = feed_lines(
        tracker,
        "[2025-12-23 14:18:05 TP0] Init torch distributed begin.",
        "[2025-12-23 14:18:01 TP1] Load weight begin. avail mem=1 GB",
    )
    times = [e.at for e in events if isinstance(e, PhaseChanged)]
    assert times[0] == times[1]


def test_timeline_from_live_events() -> None:
    tracker = StartupTracker("sglang", started_at=0.0)
    events = feed_lines(tracker, "[t] Init torch distributed begin.", now=5.0)
    events += feed_lines(tracker, "[t] Load weight begin. avail mem=1 GB", now=7.0)
    events += tracker.health(200, at=20.0)
    timeline = Timeline.from_events(events, engine="sglang", start=0.0)
    assert timeline.outcome is Outcome.READY
    assert timeline.durations() == {Phase.LAUNCHING: 5.0, Phase.DIST_INIT: 2.0, Phase.LOADING_WEIGHTS: 13.0}
    assert timeline.history_record() == {"launching": 5.0, "dist-init": 2.0, "loading weights": 13.0}


# -- robustness and speed ---------------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_garbage_lines(engine: str) -> None:
    tracker = StartupTracker(engine)
    junk = [
        "",
        "\x00\x01\x02",
        "[",
        "[9999-99-99 99:99:99 TP99999999999999999999] Load weight begin.",
        "(x pid=1) INFO 99-99 99:99:99 [:1]",
        "Capturing batches (bs= | 5/0 [",
        "Loading safetensors checkpoint shards: | 99999999999999999999999/1 [",
        "Decode batch, #running-req: nan, #token: inf, token usage: -1e999, accept len: ., #queue-req: 1,2,3",
        "Engine 000: Avg prompt throughput: x tokens/s, Running: reqs",
        "SpecDecoding metrics: Per-position acceptance rate: , , ,",
        "max_total_num_tokens=, max_running_requests=-",
        "Capture target decode CUDA graph begin. bs=[",
        "Capture target decode CUDA graph begin. bs=[,,,]",
        "\x1b[" * 1000,
        "^[[" * 1000,
        "a" * 100_000,
    ]
    for line in junk:
        tracker.feed_line(line)
    tracker.feed("\r\n\r\r\n" * 10)
    tracker.finish()
    assert tracker.internal_errors == 0


def test_a_long_mixed_log_goes_through_without_errors() -> None:
    """Speed is measured in benchmarks/tracker_throughput.py; here only correctness on a large input."""
    lines = (
        SGLANG_READY.splitlines()
        + [
            "[2025-12-20 10:02:00 TP0] Decode batch, #running-req: 4, #token: 2048, token usage: 0.00, "
            "accept len: 3.10, accept rate: 0.78, cuda graph: True, gen throughput (token/s): 512.34, #queue-req: 0, ",
            '[2025-12-20 10:02:00] INFO:     127.0.0.1:50002 - "POST /generate HTTP/1.1" 200 OK',
        ]
        * 200
    )
    text = "\n".join(lines * (20_000 // len(lines) + 1)) + "\n"
    count = text.count("\n")
    tracker = StartupTracker("sglang")
    events = tracker.feed(text, now=1.0)
    assert tracker.internal_errors == 0
    assert tracker.phase is Phase.READY
    assert sum(1 for e in events if isinstance(e, MetricsSeen)) >= count // 3


def test_a_start_settles_when_ready_or_gone_and_not_before() -> None:
    assert SETTLED == {Phase.READY, Phase.STOPPED, Phase.CRASHED, Phase.EXITED}
    assert all(phase.is_settled == (phase in SETTLED) for phase in Phase)
    assert not any(phase.is_settled for phase in STARTUP_ORDER[:-1]) and not Phase.STOPPING.is_settled
