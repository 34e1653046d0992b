"""`bar_line`: which progress bar a log line draws (the log view folds a bar's redraws on it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from specdash.core.bars import BarLine, bar_line
from specdash.engines.text import pre_clean

FIXTURES = Path(__file__).parent.parent / "fixtures" / "logs"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "Loading safetensors checkpoint shards:  29% Completed | 5/17 [00:03<00:09,  1.30it/s]",
            BarLine("|Loading safetensors checkpoint shards", 5, 17),
        ),
        (  # the numbers in the description change with every redraw; the bar is the same
            "Capturing batches (bs=512 avail_mem=101.02 GB):   0%|          | 0/36 [00:00<?, ?it/s]",
            BarLine("|Capturing batches (bs=# avail_mem=# GB)", 0, 36),
        ),
        (
            "Capturing batches (bs=1 avail_mem=37.08 GB): 100%|██████████| 36/36 [00:41<00:00,  1.14s/it]",
            BarLine("|Capturing batches (bs=# avail_mem=# GB)", 36, 36),
        ),
        (  # one bar per rank: the rank is part of the key, the timestamp is not
            "[2025-04-16 14:21:49 TP1] Capturing batches (bs=8 avail_mem=20.5 GB):  50%|█████ | 18/36 [00:20<00:20]",
            BarLine("TP1|Capturing batches (bs=# avail_mem=# GB)", 18, 36),
        ),
        (
            "(VllmWorker TP0 pid=42) Capturing CUDA graphs (decode, FULL): 100%|████| 35/35 [00:49<00:00,  1.41s/it]",
            BarLine("TP0 pid=42|Capturing CUDA graphs (decode, FULL)", 35, 35),
        ),
        (
            "    Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):   0%|          | 0/51 [00:00<?, ?it/s]",
            BarLine("|Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)", 0, 51),
        ),
    ],
)
def test_bars_are_recognised_with_a_stable_key(line: str, expected: BarLine) -> None:
    assert bar_line(line) == expected


@pytest.mark.parametrize(
    "line",
    [
        "[2025-04-16 14:24:02 TP0] Decode batch. #running-req: 10, #token: 5120, gen throughput (token/s): 1714.22",
        "accept rate 90% | 3/4 of the drafts",  # a percentage and a count, but no tqdm time part
        "KV cache usage: 45% | prefix hit 12%",
        "Loading safetensors checkpoint shards:  45% Completed | 70/64 [00:29<00:30]",  # more done than total
        "",
    ],
)
def test_other_lines_are_not_bars(line: str) -> None:
    assert bar_line(line) is None


def test_redraws_of_one_bar_share_a_key_in_a_real_log() -> None:
    # vLLM, Qwen3-32B + EAGLE-3: 14 redraws of the target's 17-shard bar (the last one twice), one key.
    log = (FIXTURES / "vllm_28919_qwen3_32b_eagle3_loading.log").read_text()
    bars = [bar for bar in (bar_line(pre_clean(raw)) for raw in log.splitlines()) if bar is not None]
    assert len(bars) == 14 and {bar.key for bar in bars} == {"|Loading safetensors checkpoint shards"}
    assert all(a.done <= b.done for a, b in zip(bars, bars[1:], strict=False))
    assert (bars[-1].done, bars[-1].total) == (17, 17)
