"""`specdash logs HOST [-f] [-n N]`: the server log of the current run (follow survives reconnects)."""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys

from specdash.cli._host import add_host_arguments, current_run
from specdash.errors import SpecdashError, UsageError
from specdash.safetext import escape_controls
from specdash.server.lifecycle import run_framed
from specdash.server.logfollow import LogFollower

NAME = "logs"
HELP = "print the current run's server log; -f follows it (across reconnects, no line lost or repeated)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_host_arguments(parser)
    parser.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    parser.add_argument("-n", "--lines", type=int, default=50, help="how many last lines first (default 50)")


def run(args: argparse.Namespace) -> int:
    if args.lines < 0:
        raise UsageError(f"-n must be 0 or more, not {args.lines}")
    try:
        return asyncio.run(_logs(args))
    except BrokenPipeError:  # `specdash logs h | head`
        return 0


async def _logs(args: argparse.Namespace) -> int:
    async with current_run(args) as (session, _cfg, record):
        if record is None:
            raise SpecdashError(f"no run recorded on {session.label} (start one with 'specdash up')")
        path = shlex.quote(record.log_path)
        # Framed (`run_framed`): a login banner is neither printed as log lines nor read as the size.
        if not args.follow:
            result, out = await run_framed(session.host, f"tail -n {args.lines} {path}")
            if not result.ok:
                raise SpecdashError(f"cannot read the log {escape_controls(record.log_path)} on {session.label}")
            sys.stdout.write(out)
            return 0
        # Where the last N lines start, in bytes, so that following continues exactly after them.
        result, out = await run_framed(session.host, f"stat -c %s {path} && tail -n {args.lines} {path} | wc -c")
        words = out.split()
        if not result.ok or len(words) < 2 or not all(w.isdigit() for w in words[:2]):
            raise SpecdashError(f"cannot read the log {escape_controls(record.log_path)} on {session.label}")
        size, tail_bytes = int(words[0]), int(words[1])
        follower = LogFollower(session.host, record.log_path, max(0, size - tail_bytes))
        async for lines in follower.batches():
            sys.stdout.write("".join(line + "\n" for line in lines))
            sys.stdout.flush()
        return 0
