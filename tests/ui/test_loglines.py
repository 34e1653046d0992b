"""Log line classification, highlight spans and the bounded log view's throughput."""

from __future__ import annotations

from specdash.core.startup_events import ClassifiedLine, LineKind
from specdash.ui.widgets.loglines import (
    Kind,
    LogLine,
    level_spans,
    match_spans,
    prefix_span,
    rank_spans,
    timestamp_span,
    view_line,
)
from tests.support import scenarios as sc
from tests.support.log_batches import RawLog
from tests.ui.conftest import AppFactory


def read(log: RawLog, raw: str) -> LogLine:
    """`raw` as the view shows it after the session's tracker (`log`) read it."""
    (line,) = log.classify([raw])
    return view_line(1, line)


def kinds(lines: list[str]) -> list[LineKind]:
    log = RawLog()
    return [read(log, line).line_kind for line in lines]


def test_traceback_runs_until_the_exception_line() -> None:
    """The marker that opens the traceback and the sigquit after it are crash lines (tinted as errors); the
    frames, code lines and exception line between them are the traceback."""
    assert kinds(list(sc.CRASH_LINES)) == [LineKind.CRASH] + [LineKind.TRACEBACK] * 5 + [LineKind.CRASH]
    assert read(RawLog(), sc.CRASH_LINES[0]).kind is Kind.ERROR


def test_headerless_unindented_traceback_is_a_traceback() -> None:
    lines = [
        'File "/sgl/scheduler.py", line 4046, in run_scheduler_process',
        "    scheduler = Scheduler(",
        'File "/sgl/cache_controller.py", line 871, in set_draft_kv_pool',
        "self._maybe_register_draft_with_storage()",
        "RuntimeError: Failed to register buffer to Mooncake Store, error code: -1",
        "[2026-06-22 10:00:00] next line",
    ]
    assert kinds(lines) == [LineKind.TRACEBACK] * 5 + [LineKind.NORMAL]


def test_progress_bars_carry_their_identity() -> None:
    classifier = RawLog()
    a = read(classifier, "Loading safetensors checkpoint shards:  25% Completed | 1/4 [00:01<00:03]")
    b = read(classifier, "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:02<00:02]")
    c = read(classifier, "Capturing batches (bs=512 avail_mem=3.1 GB):   0%|          | 0/51 [00:00<?, ?it/s]")
    assert a.line_kind is b.line_kind is c.line_kind is LineKind.PROGRESS
    assert a.bar == b.bar != c.bar and c.bar is not None and "Capturing batches" in c.bar


def test_levels_ready_lines_and_ansi() -> None:
    classifier = RawLog()
    warning = read(classifier, "\x1b[33m[2025-04-16 14:21:50] WARNING  fused_moe.py:12: default config\x1b[0m")
    assert warning.kind is Kind.WARNING and "\x1b" not in warning.text
    assert read(classifier, "[2025-04-16 14:23:33] The server is fired up and ready to roll!").kind is Kind.READY
    assert read(classifier, "RuntimeError: CUDA error: an illegal memory access").kind is Kind.ERROR
    vllm = RawLog()
    assert read(vllm, "(APIServer pid=1) ERROR 10-21 09:11:55 [core.py:1] EngineCore failed").kind is Kind.ERROR
    assert read(vllm, "(APIServer pid=1) INFO:     Application startup complete.").kind is Kind.READY
    assert (
        read(
            vllm, "(APIServer pid=1) INFO 05-26 19:19:56 [core.py:1] [shutdown] API server: shutdown triggered"
        ).line_kind
        is LineKind.STOP
    )


def test_lines_the_session_classified_are_taken_as_they_are() -> None:
    line = ClassifiedLine(7, "[t TP0] Decode batch, #running-req: 1", LineKind.SERVING)
    taken = view_line(1, line)
    assert (taken.text, taken.kind, taken.line_kind) == (line.text, Kind.NORMAL, LineKind.SERVING)


def test_rank_tags() -> None:
    line = "[2025-04-16 14:22:53 DP3 TP3] Load weight end."
    assert [line[a:b] for a, b in rank_spans(line)] == ["DP3", "TP3"]
    assert prefix_span(line) == (0, 29)
    vllm = "(EngineCore_DP0 pid=188893) INFO 10-21 09:11:55 [backends.py:164] Directly load"
    assert [vllm[a:b] for a, b in rank_spans(vllm)] == ["(EngineCore_DP0 pid=188893)"]
    assert rank_spans("[2025-04-16 14:22:53] no rank here TP3") == []


def test_level_and_match_spans() -> None:
    line = "WARNING x ERROR y"
    assert level_spans(line) == [(0, 7, False), (10, 15, True)]
    assert match_spans("Cuda cuda CUDA", "cuda") == [(0, 4), (5, 9), (10, 14)]
    assert match_spans("anything", "") == []


def test_the_tracker_numbers_and_cleans_a_long_stream() -> None:
    # The view's speed at 10,000 lines/s is measured in benchmarks/ui_latency.py; here: order and cleaning hold.
    lines = [f"\x1b[0;36m[2025-04-16 14:22:{i % 60:02d} TP{i % 8}]\x1b[0m Decode batch. #r: {i}" for i in range(10_000)]
    out = RawLog().classify(lines)
    assert [line.no for line in out] == list(range(1, 10_001))
    assert all("\x1b" not in line.text for line in out)
    assert out[-1].text.endswith("#r: 9999")


async def test_log_view_keeps_a_bounded_ring_under_a_flood(build: AppFactory) -> None:
    """Ten seconds of 10,000 lines/s (40 batches): the view keeps its 5,000-line ring and follows the end.

    How fast it does so is measured in benchmarks/ui_latency.py, not asserted here.
    """
    from specdash.ui.widgets.logview import LogView
    from tests.support.log_batches import log_batch

    app, session = build(sc.loading())
    batch = log_batch(tuple(f"[2025-04-16 14:22:53 TP{i % 8}] Decode batch. #token: {i}" for i in range(2_500)))
    async with app.run_test(size=(120, 40)) as pilot:
        view = app.screen.query_one(LogView)
        for _ in range(40):  # 4 batches a second for 10 s
            session.emit(batch)
            await pilot.pause()
        assert len(view.shown) == 5_000 and view.scroll_offset.y == view.max_scroll_y


def test_timestamp_span_keeps_ranks_and_messages() -> None:
    def without(line: str) -> str:
        span = timestamp_span(line)
        return line if span is None else line[: span[0]] + line[span[1] :]

    assert without("[2025-04-16 14:23:30 TP0] Capture cuda graph end.") == "[TP0] Capture cuda graph end."
    assert without("[2025-04-16 14:23:31] INFO:     Uvicorn running") == "INFO:     Uvicorn running"
    assert without("INFO 04-16 14:22:53 [core.py:1] Waiting") == "INFO [core.py:1] Waiting"
    assert (
        without("(EngineCore_DP0 pid=1) INFO 04-16 14:22:53 [core.py:1] x")
        == "(EngineCore_DP0 pid=1) INFO [core.py:1] x"
    )
    # No timestamp: a tqdm time, a time in the message, a line that only looks like one.
    for line in (
        "Loading safetensors checkpoint shards:  29% Completed | 5/17 [00:03<00:09,  1.30it/s]",
        '  File "/sglang/srt/managers/scheduler.py", line 1999',
        f"{'x' * 90} at 2025-04-16 14:23:30",
    ):
        assert without(line) == line
