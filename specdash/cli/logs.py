"""`specdash logs HOST [-f] [-n N] [--raw]`: the server log of the current run (follow survives reconnects).

What the server wrote is shown with its control characters escaped (`escape_controls`): an OSC 52 sequence
in a log line must not write the user's clipboard, nor a bidi override reorder what they read. `--raw` gives
the bytes for a user who wants them (a pipe to a file, a terminal they trust with them).
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys

from specdash.cli._host import current_run
from specdash.core.lines import split_lines
from specdash.errors import SpecdashError
from specdash.limits import LOG_TAIL_BYTES
from specdash.safetext import escape_controls
from specdash.server.lifecycle import run_framed
from specdash.server.logfollow import LogFollower


def run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_logs(args))
    except BrokenPipeError:  # `specdash logs h | head`
        return 0


def shown(line: str, raw: bool) -> str:
    """One log line as `logs` prints it: escaped, unless the user asked for `--raw`."""
    return line if raw else escape_controls(line)


def tail_command(path: str, lines: int) -> str:
    """The last `lines` lines of `path`, read from its last `LOG_TAIL_BYTES` bytes only (bounded whatever
    the file holds: a log truncated in place can be a hole of NULs the size of what it held)."""
    quoted = shlex.quote(path)  # `test -r` first: a pipe's status is its last command's (no pipefail in sh)
    return f"test -r {quoted} && tail -c {LOG_TAIL_BYTES} {quoted} | tail -n {lines}"


async def _logs(args: argparse.Namespace) -> int:
    async with current_run(args) as (session, _cfg, record):
        if record is None:
            raise SpecdashError(f"no run recorded on {session.label} (start one with 'specdash up')")
        if record.damaged:
            raise SpecdashError(f"the run record {escape_controls(record.id)} on {session.label} is damaged")
        path = shlex.quote(record.log_path)
        # Framed (`run_framed`): a login banner is neither printed as log lines nor read as the size.
        if not args.follow:
            result, out = await run_framed(session.host, tail_command(record.log_path, args.lines))
            if not result.ok:
                raise SpecdashError(f"cannot read the log {escape_controls(record.log_path)} on {session.label}")
            sys.stdout.write(out if args.raw else "".join(escape_controls(line) + "\n" for line in split_lines(out)))
            return 0
        # Where the last N lines start, in bytes, so that following continues exactly after them.
        result, out = await run_framed(
            session.host, f"stat -c %s {path} && {{ {tail_command(record.log_path, args.lines)}; }} | wc -c"
        )
        words = out.split()
        if not result.ok or len(words) < 2 or not all(w.isdigit() for w in words[:2]):
            raise SpecdashError(f"cannot read the log {escape_controls(record.log_path)} on {session.label}")
        size, tail_bytes = int(words[0]), int(words[1])
        follower = LogFollower(session.host, record.log_path, max(0, size - tail_bytes))
        async for lines in follower.batches():
            sys.stdout.write("".join(shown(line, args.raw) + "\n" for line in lines))
            sys.stdout.flush()
        return 0
