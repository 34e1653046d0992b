"""`specdash demo`: the dashboard offline, against the built-in SGLang simulator over an embedded SSH server."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from collections.abc import Callable
from pathlib import Path

from specdash.cli.demo_session import TIME_SCALE, TOUR_TIME_SCALE, demo_session
from specdash.errors import UsageError
from specdash.ui.app import make_app


def run(args: argparse.Namespace) -> int:

    if args.time_scale is None:
        args.time_scale = TOUR_TIME_SCALE if args.autoplay else TIME_SCALE
    if not 0 < args.time_scale <= 10:
        raise UsageError(f"--time-scale must be in (0, 10], not {args.time_scale}")
    return asyncio.run(_demo(args.autoplay, args.time_scale, args.screenshot_dir, args.db))


DEMO_QUIT = (
    "q quits the demo: it stops the simulated server and the embedded SSH host with it (nothing keeps running; "
    "on a real host, `specdash connect` leaves the server running)."
)
"""What `q` does in the demo, for its help screen."""


async def _demo(autoplay: bool, time_scale: float, screenshot_dir: Path | None = None, db: Path | None = None) -> int:

    async with demo_session(time_scale, tour=autoplay, db=db) as demo:
        app = make_app(demo.session, autoplay=autoplay, quit_note=DEMO_QUIT, screenshot_dir=screenshot_dir)
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


def _hard_exit(abandon: Callable[[], None]) -> None:
    abandon()
    os._exit(128 + signal.SIGHUP)
