"""Log line classification, highlight spans and the bounded log view's throughput."""

from __future__ import annotations

import time

from specdash.ui.widgets.loglines import Classifier, Kind, level_spans, match_spans, prefix_span, rank_spans
from tests.ui import scenarios as sc
from tests.ui.conftest import AppFactory


def kinds(lines: list[str]) -> list[Kind]:
    classifier = Classifier()
    return [classifier.feed(line).kind for line in lines]


def test_traceback_runs_until_the_exception_line() -> None:
    assert kinds(list(sc.CRASH_LOG.lines)) == [Kind.TRACEBACK] * 6 + [Kind.NORMAL]


def test_levels_ready_lines_and_ansi() -> None:
    classifier = Classifier()
    warning = classifier.feed("\x1b[33m[2025-04-16 14:21:50] WARNING  fused_moe.py:12: default config\x1b[0m")
    assert warning.kind is Kind.WARNING and "\x1b" not in warning.text
    assert classifier.feed("(APIServer pid=1) ERROR 10-21 09:11:55 [core.py:1] EngineCore failed").kind is Kind.ERROR
    assert classifier.feed("[2025-04-16 14:23:33] The server is fired up and ready to roll!").kind is Kind.READY
    assert classifier.feed("(APIServer pid=1) INFO:     Application startup complete.").kind is Kind.READY
    assert classifier.feed("RuntimeError: CUDA error: an illegal memory access").kind is Kind.ERROR


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


def test_classifier_keeps_up_with_10k_lines_per_second() -> None:
    # One second of a 10,000 lines/s stream must classify in well under a second (budget: a tenth).
    lines = [f"[2025-04-16 14:22:{i % 60:02d} TP{i % 8}] Decode batch. #running-req: {i % 64}" for i in range(10_000)]
    classifier = Classifier()
    start = time.perf_counter()
    for line in lines:
        classifier.feed(line)
    assert time.perf_counter() - start < 0.25


async def test_log_view_ingests_ten_seconds_of_10k_lines_per_second(build: AppFactory) -> None:
    from collections.abc import Iterable

    from specdash.core.events import LogBatch
    from specdash.ui.widgets.logview import LogView

    app, session = build(sc.loading())
    batch = LogBatch(tuple(f"[2025-04-16 14:22:53 TP{i % 8}] Decode batch. #token: {i}" for i in range(2_500)))
    async with app.run_test(size=(120, 40)) as pilot:
        view = app.screen.query_one(LogView)
        ingest = 0.0
        append = view.append

        def timed(lines: Iterable[str]) -> None:
            nonlocal ingest
            start = time.perf_counter()
            append(lines)
            ingest += time.perf_counter() - start

        view.append = timed  # type: ignore[method-assign,assignment]
        start = time.perf_counter()
        for _ in range(40):  # 4 batches a second for 10 s
            session.emit(batch)
            await pilot.pause()
        elapsed = time.perf_counter() - start
        assert len(view.shown) == 5_000 and view.scroll_offset.y == view.max_scroll_y
        # Budgets generous enough for a loaded CI box: ingest (measured ~0.3-0.5 s) must stay a small share of
        # the 10 s it covers, and everything, with a render after every batch, must keep up with real time.
        assert ingest < 2.5, ingest
        assert elapsed < 10.0, elapsed
