"""`eventually`: returns the value that passed, and fails naming what was awaited and the last value seen."""

from __future__ import annotations

import itertools

import pytest

from tests.support.eventually import eventually, eventually_sync


async def test_returns_the_first_value_that_passes() -> None:
    counter = itertools.count()
    assert await eventually(lambda: next(counter), until=lambda n: n >= 3, timeout=60, what="3", interval=0) == 3


async def test_awaits_an_async_probe() -> None:
    values = iter([[], [], ["x"]])

    async def probe() -> list[str]:
        return next(values)

    assert await eventually(probe, timeout=60, what="a value", interval=0) == ["x"]


async def test_timeout_names_what_and_the_last_value() -> None:
    with pytest.raises(AssertionError) as failed:
        await eventually(lambda: [4242], until=lambda pids: not pids, timeout=0, what="no survivors")
    assert str(failed.value) == "no survivors: not within 0 s; last seen:\n[4242]"


def test_sync_version_shows_a_screen_as_it_is() -> None:
    with pytest.raises(AssertionError) as failed:
        eventually_sync(lambda: "line one\nline two", until=lambda s: "READY" in s, timeout=0, what="READY")
    assert str(failed.value) == "READY: not within 0 s; last seen:\nline one\nline two"
    assert eventually_sync(lambda: "READY\n", until=lambda s: "READY" in s, timeout=0, what="READY") == "READY\n"


def test_a_probe_that_raises_ends_the_wait() -> None:
    def died() -> bool:
        raise RuntimeError("the process exited with 1")

    with pytest.raises(RuntimeError, match="exited with 1"):
        eventually_sync(died, timeout=60, what="ready")
