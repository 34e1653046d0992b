"""`specdash up HOST --mode M [--wait]`: start a server; with --wait, follow it to ready or crash."""

from __future__ import annotations

import argparse
import asyncio
import sys

from specdash.cli._host import add_host_arguments, connected, host_config, load_config
from specdash.cli._live import StatusPrinter
from specdash.core.status_text import leftovers_text
from specdash.phases import SETTLED, Phase

NAME = "up"
HELP = "start a server in a mode (refused if one runs or the port is busy); --wait follows it to ready"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_host_arguments(parser)
    parser.add_argument("--mode", "-m", required=True, help="a mode from the config")
    parser.add_argument("--wait", action="store_true", help="print phases until ready (exit 0) or crashed (exit 1)")


def run(args: argparse.Namespace) -> int:
    return asyncio.run(start(args, switch=False))


async def start(args: argparse.Namespace, *, switch: bool) -> int:
    """`up` and `switch` share this: start (or stop, then start) the mode, and follow it with --wait."""
    cfg = load_config(args)
    cfg.mode(args.mode)  # an unknown mode is a usage error before anything connects
    printer = StatusPrinter(host=args.host)
    async with connected(args, cfg, host_config(args, cfg), printer) as session:
        if switch:
            outcome = await session.switch(args.mode, restart=bool(getattr(args, "restart", False)))
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
