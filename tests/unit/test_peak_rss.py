"""The memory measure of the flood test sees what a block held at its peak, even after the block freed it, and
memory an earlier test freed cannot hide it."""

from __future__ import annotations

from tests.support.peak_rss import peak_rss

MB = 1024 * 1024


def test_a_block_that_held_64_mb_at_its_peak_reports_them_after_freeing_them() -> None:
    earlier = [bytearray(1024) for _ in range(64 * 1024)]  # 64 MB in small objects, freed before the block
    del earlier
    with peak_rss() as memory:
        held = bytearray(64 * MB)
        held[::4096] = b"x" * len(held[::4096])  # touch every page: resident, not just reserved
        del held
    assert memory.added >= 60 * MB, memory


def test_a_block_that_holds_nothing_reports_little() -> None:
    with peak_rss() as memory:
        sum(range(100_000))
    assert memory.added < 8 * MB, memory
