"""Cancelling a tune starts nothing new (issue 27 point 2), over the real stack: the embedded SSH host, the
simulator, the dashboard's tune (`specdash.tune.job.DashboardTunes`) on a `RemoteSession`.

Before: cancelled while the server of its next setting was starting, the tune ended ("tune cancelled") and
that server went on to ready and stayed up. Now the start in flight is stopped, nothing else starts, and the
tune's last word says what runs.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from specdash.cli.demo_session import demo_session
from specdash.config import TuneConfig
from specdash.core.events import Notice, ServerStatus, SessionEvent, TuneProgress
from specdash.phases import Phase
from specdash.server.remote_session import RemoteSession, running
from specdash.tune.job import DashboardTunes
from tests.support.eventually import eventually

SCALE = 0.02
"""The simulator's clock: a start takes about 10 s, long enough to cancel one half-way on a loaded machine."""
SMALL = TuneConfig("cancel-me", "eagle3", "steps=1,3 topk=1 draft=2", levels="1", repeats=1)


STARTING = {
    # the launch itself (the remote start command may still be in flight: `RemoteSession.start` undoes it)
    "launching": {Phase.LAUNCHING},
    # the watched start, past the launch: the tune stops the server it was starting
    "loading": {Phase.LOADING_WEIGHTS, Phase.CAPTURING_GRAPHS, Phase.LOADING_DRAFT, Phase.CAPTURING_DRAFT_GRAPHS},
}


@pytest.mark.parametrize("when", sorted(STARTING))
async def test_a_cancel_during_the_next_settings_start_stops_it_and_starts_nothing(when: str) -> None:
    async with demo_session(SCALE) as demo:
        session: RemoteSession = demo.session
        session.config = replace(session.config, tunes={SMALL.name: SMALL})
        session.sweep_defaults = replace(session.sweep_defaults, duration_s=1.0)
        events: list[SessionEvent] = []
        session_events: list[object] = []
        async with running(session):
            session.subscribe(session_events.append)
            await asyncio.wait_for(session.attached.wait(), 60)
            tunes = DashboardTunes(session)
            task = asyncio.create_task(tunes.run(SMALL.name, events.append))

            def starting_a_setting() -> ServerStatus:
                return session.status

            # The baseline measured, the tune restarts the server for its first setting: cancel before ready.
            status = await eventually(
                starting_a_setting,
                until=lambda s: s.mode.startswith("eagle3@") and s.phase in STARTING[when],
                timeout=240,
                interval=0.05,
                what=f"the server of the tune's first setting {when}",
            )
            setting_mode = status.mode
            await tunes.cancel()
            await asyncio.wait({task}, timeout=120)
            assert task.cancelled(), "the tune ended by the cancel"
            assert not session.tune_running()

            # Nothing runs: the start in flight was stopped, on the host too, and no other mode started.
            await eventually(
                lambda: session.status.phase, until=lambda p: p is Phase.STOPPED, timeout=60, what="stopped"
            )
            record = await session.lifecycle.current()
            assert record is None or not record.alive, record
            cancelled = [e for e in events if isinstance(e, TuneProgress) and e.phase == "cancelled"]
            assert len(cancelled) == 1
            assert cancelled[0].after.startswith("nothing runs now") and setting_mode in cancelled[0].after
            assert any(isinstance(e, Notice) and "cancelled: nothing runs now" in e.text for e in events)
            started = {s.mode for s in session_events if isinstance(s, ServerStatus) and s.phase is Phase.LAUNCHING}
            assert started <= {SMALL.baseline, setting_mode}, started
            # The report counts what ran: no restart "saved" by the cancel.
            assert cancelled[0].report["restarts_saved"] == 0
