"""`specdash up HOST --mode M [--wait]`: start a server; with --wait, follow it to ready or crash."""

from __future__ import annotations

import argparse
import asyncio
import sys

from specdash.cli._host import connected, host_config, load_config
from specdash.cli._live import StatusPrinter
from specdash.cli.status import log_tail, where_it_is
from specdash.core.status_text import leftovers_text
from specdash.phases import SETTLED, Phase
from specdash.server.remote_session import RemoteSession


def run(args: argparse.Namespace) -> int:
    return asyncio.run(start(args, switch=False))


async def start(args: argparse.Namespace, *, switch: bool) -> int:
    """`up` and `switch` share this: start (or stop, then start) the mode, and follow it with --wait."""
    cfg = load_config(args)
    cfg.mode(args.mode)  # an unknown mode is a usage error before anything connects
    printer = StatusPrinter(host=args.host)
    async with connected(args, cfg, host_config(args, cfg), printer) as session:
        if switch and not args.restart and (live := await _live_as_asked(session, args.mode)):
            # A restart throws the whole load away (minutes on a large model): only when asked for.
            print(f"{live}; nothing to do (--restart restarts it)")
            if not args.wait:
                return 0
        elif switch:
            outcome = await session.switch(args.mode, restart=args.restart)
            print("; ".join((outcome.text, *outcome.notes)))
            if outcome.resident:
                print(f"  {outcome.steps_text}")
            if outcome.resident:
                return 0  # woken and verified: live already
        else:
            await session.start(args.mode)
        if not args.wait:
            pid = session.status.pid
            print(f"started {args.mode} on {session.label} (pid {pid}); follow it: specdash logs {args.host} -f")
            return 0
        final = await session.wait_status(SETTLED)
        if final.phase is Phase.READY:
            print(f"{args.mode} is ready on {session.label} (port {final.port})")
            return 0
        reason = final.crash.reason if final.crash else final.phase.value
        print(f"{args.mode} {final.phase.value}: {reason}", file=sys.stderr)
        if final.crash:
            print("\n".join("  " + line for line in final.crash.excerpt[-25:]), file=sys.stderr)
            await session.watch_finished(timeout=15.0)  # it lists what the crash left in the process group
            if leftovers := leftovers_text(session.status, args.host):
                print(leftovers, file=sys.stderr)
        return 1


async def _live_as_asked(session: RemoteSession, mode: str) -> str:
    """`MODE is already live on HOST (pid N, phase)` when the host's recorded run is MODE, alive and neither
    crashed nor exited by its log; else empty."""
    record = await session.lifecycle.current()
    if record is None or record.damaged or not record.alive or record.mode != mode:
        return ""
    phase, _ = where_it_is(record, await log_tail(session, record))
    if phase in (Phase.CRASHED, Phase.EXITED):
        return ""
    return f"{mode} is already live on {session.label} (pid {record.pid}, {phase.value})"
