"""`specdash demo`: the dashboard offline, against the built-in SGLang simulator over an embedded SSH server."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from specdash.cli.demo_session import TIME_SCALE, TOUR_TIME_SCALE, demo_host_name, demo_session
from specdash.core.resident import duration_text
from specdash.errors import UsageError
from specdash.phases import Phase
from specdash.server.remote_session import running
from specdash.ui.app import make_app


def run(args: argparse.Namespace) -> int:

    if args.time_scale is None:
        args.time_scale = TOUR_TIME_SCALE if args.autoplay else TIME_SCALE
    if not 0 < args.time_scale <= 10:
        raise UsageError(f"--time-scale must be in (0, 10], not {args.time_scale}")
    if args.resident:
        return asyncio.run(_resident(args.time_scale, args.db))
    return asyncio.run(_demo(args.autoplay, args.time_scale, args.screenshot_dir, args.db))


DEMO_QUIT = (
    "q quits the demo: it stops the simulated server and the embedded SSH host with it (nothing keeps running; "
    "on a real host, `specdash connect` leaves the server running)."
)
"""What `q` does in the demo, for its help screen."""


async def _demo(autoplay: bool, time_scale: float, screenshot_dir: Path | None = None, db: Path | None = None) -> int:

    async with demo_session(time_scale, tour=autoplay, db=db, name=demo_host_name(time_scale)) as demo:
        app = make_app(
            demo.session, autoplay=autoplay, quit_note=DEMO_QUIT, quit_stops_server=True, screenshot_dir=screenshot_dir
        )
        loop = asyncio.get_running_loop()
        # SIGTERM: quit as with `q`; the demo's cleanup then stops its simulator.
        loop.add_signal_handler(signal.SIGTERM, app.exit)
        # SIGHUP: the terminal is gone, and Textual's own shutdown blocks writing to it. Leave at once; the
        # simulator runs with --sim-exit-with our PID and follows us out.
        loop.add_signal_handler(signal.SIGHUP, lambda: _hard_exit(demo.abandon))
        await app.run_async()
    # After the demo's cleanup: its simulator and SSH host are gone.
    print("The demo stopped its simulator and its SSH host: nothing of it keeps running.")
    return app.return_code or 0


async def _resident(time_scale: float, db: Path | None) -> int:
    """Restart vs resident switch on the simulator: each switch's line, then the table."""

    settled = (Phase.READY, Phase.CRASHED, Phase.EXITED)
    rows: list[tuple[str, str, float, str]] = []
    async with demo_session(time_scale, db=db) as demo, running(demo.session) as session:
        for target in ("r-baseline", "r-eagle3", "r-baseline", "r-eagle3"):
            began = time.monotonic()
            outcome = await session.switch(target)
            final = await session.wait_status(settled, timeout=900)
            if final.phase is not Phase.READY:
                print(f"{target} {final.phase.value}: {final.crash.reason if final.crash else ''}")
                return 1
            took = time.monotonic() - began
            how = "resident switch" if outcome.resident else "restart"
            check = f"verified {outcome.identical}/{outcome.total} identical" if outcome.resident else ""
            if outcome.accept is not None:
                check += f", accept length {outcome.accept:.2f}"
            print(f"{target}: {outcome.text} (ready after {duration_text(took)})")
            if outcome.steps:
                print(f"  {outcome.steps_text}")
            rows.append((target, how, took, check))
    print(f"\nsimulator, Kimi-K2.5 TP=8 preset at --time-scale {time_scale:g} (startup and copy times scale alike)")
    print(f"{'to':<20} {'how':<16} {'seconds':>8}  check")
    for target, how, took, check in rows:
        print(f"{target:<20} {how:<16} {took:8.1f}  {check}")
    return 0


def _hard_exit(abandon: Callable[[], None]) -> None:
    abandon()
    os._exit(128 + signal.SIGHUP)
