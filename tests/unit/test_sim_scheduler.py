"""The batch scheduler in-process (no HTTP): caps, queueing, speculation per step, aborts, logging."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest

from specdash.sim.logstyle import LogWriter
from specdash.sim.model import EAGLE3, ThroughputModel
from specdash.sim.scheduler import Scheduler, SimRequest
from tests.support.eventually import eventually


@pytest.fixture
def log_fd() -> Iterator[int]:
    """The scheduler's log goes to /dev/null."""
    fd = os.open(os.devnull, os.O_WRONLY)
    yield fd
    os.close(fd)


def make(model: ThroughputModel, fd: int, **kw: object) -> Scheduler:
    log = LogWriter(False, 2, err_fd=fd, out_fd=fd)
    return Scheduler(model, log, seed=1, kv_tokens=100_000, cuda_graph_max_bs=48, **kw)  # type: ignore[arg-type]


def req(rid: str, n: int) -> SimRequest:
    return SimRequest(rid=rid, prompt_tokens=10, max_new_tokens=n)


async def run_until(sched: Scheduler, reqs: list[SimRequest], timeout: float = 10) -> None:
    task = asyncio.ensure_future(sched.run())
    try:
        for r in reqs:
            sched.submit(r)
        await asyncio.wait_for(asyncio.gather(*(r.wait_progress(r.max_new_tokens + 1) for r in reqs)), timeout)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_requests_above_the_cap_wait_for_a_slot(log_fd: int) -> None:
    sched = make(ThroughputModel(max_running=2, speed=50), log_fd)
    a, b, c = req("a", 20), req("b", 20), req("c", 5)
    await run_until(sched, [a, b, c])
    assert all(r.completion_tokens == r.max_new_tokens for r in (a, b, c))
    assert c.first_token_at is not None and a.finished_at is not None and b.finished_at is not None
    assert c.first_token_at >= min(a.finished_at, b.finished_at), "c ran only after a slot freed"
    assert sched.counters.num_requests == 3 and sched.counters.generation_tokens == 45


async def test_speculative_steps_give_several_tokens(log_fd: int) -> None:
    sched = make(ThroughputModel(spec=EAGLE3, num_steps=3, max_running=48, speed=50), log_fd, num_draft_tokens=4)
    r = req("a", 200)
    await run_until(sched, [r])
    assert r.completion_tokens == 200
    assert 1.8 < r.spec_tokens / r.spec_steps < 2.6
    assert sched.avg_spec_accept_length == pytest.approx(r.spec_tokens / r.spec_steps)


async def test_dynamic_mode_stops_speculating_above_n(log_fd: int) -> None:
    model = ThroughputModel(spec=EAGLE3, num_steps=3, max_running=48, disable_spec_above=2, speed=50)
    sched = make(model, log_fd)
    reqs = [req(str(i), 30) for i in range(3)]
    await run_until(sched, reqs)
    # While all three ran, no step speculated: each gained exactly one token per step then.
    for r in reqs:
        assert r.spec_steps < r.verify_ct


async def test_crash_threshold_calls_back_and_stops(log_fd: int) -> None:
    crashed = asyncio.Event()
    sched = make(ThroughputModel(speed=50), log_fd, crash_at_batch=1, on_crash=crashed.set)
    task = asyncio.ensure_future(sched.run())
    a, b = req("a", 50), req("b", 50)
    sched.submit(a)
    sched.submit(b)
    await asyncio.wait_for(crashed.wait(), 5)
    assert sched.crashed and not a.finished
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_aborted_requests_leave_the_batch(log_fd: int) -> None:
    sched = make(ThroughputModel(speed=50), log_fd)
    task = asyncio.ensure_future(sched.run())
    a, b = req("a", 10_000), req("b", 30)
    sched.submit(a)
    sched.submit(b)
    await asyncio.wait_for(a.wait_progress(5), 5)
    a.abort()
    await asyncio.wait_for(b.wait_progress(31), 5)
    assert a.finish_reason is not None and a.finish_reason["type"] == "abort"
    # The scheduler drops finished and aborted requests at its next step: wait for it, with a deadline.
    await eventually(lambda: sched.idle, timeout=30, what="the scheduler idle after the abort", interval=0.01)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
