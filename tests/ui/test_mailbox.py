"""The log mailbox between the session and the dashboard: coalesced, sliced, nothing lost but what a reset
clears."""

from __future__ import annotations

from specdash.core.events import LogBatch
from specdash.ui.messages import LogMailbox
from tests.support.log_batches import log_batch


def _batch(first: int, n: int, *, reset: bool = False) -> LogBatch:
    return log_batch((f"line {i}" for i in range(first, first + n)), reset=reset)


def test_one_message_is_waiting_at_a_time_and_it_takes_every_batch() -> None:
    box = LogMailbox()
    assert box.put(_batch(0, 3)) is True  # the dashboard must be told
    assert box.put(_batch(3, 3)) is False  # one message already waits: it will take this too
    taken = box.take()
    assert [line.text for batch in taken for line in batch.lines] == [f"line {i}" for i in range(6)]
    assert not box.pending
    assert box.put(_batch(6, 1)) is True  # taken: the next batch tells again


def test_a_long_backlog_is_taken_in_slices_in_order() -> None:
    box = LogMailbox()
    box.put(_batch(0, 5, reset=True))
    box.put(_batch(5, 5))
    first = box.take(limit=7)
    assert sum(len(b.lines) for b in first) == 7 and first[0].reset
    assert box.pending
    assert box.put(_batch(10, 2)) is False  # still told: the taker posts the next slice itself
    rest = box.take(limit=7)
    assert not any(b.reset for b in rest)  # the reset belongs to the first slice only
    lines = [line.text for batch in (*first, *rest) for line in batch.lines]
    assert lines == [f"line {i}" for i in range(12)]
    assert not box.pending


def test_a_reset_drops_what_waited_before_it() -> None:
    box = LogMailbox()
    box.put(_batch(0, 4))
    box.put(_batch(100, 2, reset=True))
    taken = box.take()
    assert [[line.text for line in b.lines] for b in taken] == [["line 100", "line 101"]] and taken[0].reset
