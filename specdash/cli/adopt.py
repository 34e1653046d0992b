"""`specdash adopt HOST --port P | --pid N | --job ID [--log PATH] [--wait]`: take over a server started by hand.

On a Slurm host (`scheduler = "slurm"`), `--job ID` adopts a batch job you submitted yourself: it must be yours
and still queued or running; its output file is followed and `down` cancels it (`scancel`), nothing else.

Finds the process (by the port it listens on, or its PID), tells what it is (engine, the configured mode
it matches or its flags, its log), and records it as the host's current run, so `connect`, `bench`,
`status` and `down` treat it like a server specdash started. It sends no signal: stopping it later
(`specdash down`) asks for a confirmation that names its PID and command.
"""

from __future__ import annotations

import argparse
import asyncio

from specdash.cli._host import connected, host_config, load_config
from specdash.cli._live import StatusPrinter
from specdash.errors import SpecdashError, UsageError
from specdash.phases import SETTLED, Phase


def run(args: argparse.Namespace) -> int:
    if args.port is not None and not 0 < args.port < 65536:
        raise UsageError(f"--port {args.port}: not a TCP port (1-65535)")
    if args.job is not None and not (args.job.isascii() and args.job.isdigit() and len(args.job) <= 12):
        raise UsageError(f"--job {args.job!r}: not a Slurm job id (digits)")
    return asyncio.run(_adopt(args))


async def _adopt(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    printer = StatusPrinter(host=args.host)
    async with connected(args, cfg, host_config(args, cfg), printer) as session:
        if args.job is not None:
            await session.adopt_job(args.job, args.mode)
            print(f"adopted job {args.job}; stop it with: specdash down {args.host}")
            return 0 if not args.wait else (0 if (await session.wait_status(SETTLED)).phase is Phase.READY else 1)
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
