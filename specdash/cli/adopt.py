"""`specdash adopt HOST --port P | --pid N [--log PATH] [--wait]`: take over a server started by hand.

Finds the process (by the port it listens on, or its PID), tells what it is (engine, the configured mode
it matches or its flags, its log), and records it as the host's current run, so `connect`, `bench`,
`status` and `down` treat it like a server specdash started. It sends no signal: stopping it later
(`specdash down`) asks for a confirmation that names its PID and command.
"""

from __future__ import annotations

import argparse
import asyncio

from specdash.cli._host import add_host_arguments, connected, host_config, load_config
from specdash.cli._live import StatusPrinter
from specdash.errors import SpecdashError, UsageError
from specdash.phases import SETTLED, Phase

NAME = "adopt"
HELP = "adopt a server started by hand (found by --port or --pid): watch it, bench it, stop it with specdash"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_host_arguments(parser)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--port", type=int, help="the port the server listens on")
    which.add_argument("--pid", type=int, help="the server's process id on the host")
    parser.add_argument("--log", default="", help="its log file on the host, when its output goes to no file")
    parser.add_argument("--dry-run", action="store_true", help="say what would be adopted, change nothing")
    parser.add_argument("--wait", action="store_true", help="follow it until ready (exit 0) or crashed (exit 1)")


def run(args: argparse.Namespace) -> int:
    if args.port is not None and not 0 < args.port < 65536:
        raise UsageError(f"--port {args.port}: not a TCP port (1-65535)")
    return asyncio.run(_adopt(args))


async def _adopt(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    printer = StatusPrinter(host=args.host)
    async with connected(args, cfg, host_config(args, cfg), printer) as session:
        target = await session.find_adoptable(pid=args.pid, port=args.port, log=args.log)
        print(target.describe())
        if not target.ok:
            raise SpecdashError(f"not adopted ({len(target.problems)} reason(s) above)")
        if args.dry_run:
            return 0
        await session.adopt(target)
        print(f"adopted pid {target.found.pid} as {target.mode}; stop it with: specdash down {args.host}")
        if not args.wait:
            return 0
        final = await session.wait_status(SETTLED)
        return 0 if final.phase is Phase.READY else 1
