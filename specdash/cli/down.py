"""`specdash down HOST`: stop the server specdash started there (SIGTERM the group, SIGKILL after a grace)."""

from __future__ import annotations

import argparse
import asyncio

from specdash.cli._host import add_host_arguments, current_run
from specdash.config import Config
from specdash.limits import MAX_GRACE_S, number_option

NAME = "down"
HELP = (
    "stop the server specdash started on HOST; reports what was killed and whether the port is free "
    "(exit 0 when nothing was running)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_host_arguments(parser)
    parser.add_argument(
        "--grace",
        type=number_option(0.0, MAX_GRACE_S),
        help="seconds between SIGTERM and SIGKILL, 0 to 3600 (default: the mode's stop_timeout, 30)",
    )


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_down(args))


async def _down(args: argparse.Namespace) -> int:
    async with current_run(args) as (session, cfg, record):
        if record is None or not record.alive:
            # Nothing to stop is what `down` wants: cleanup scripts call it unconditionally.
            print(f"Nothing to stop: no server started by specdash is running on {session.label}.")
            return 0
        grace = args.grace if args.grace is not None else _grace(cfg, record.mode)
        report = await session.lifecycle.stop(record, grace)
    print(report.summary())
    return 0 if report.port_free and not report.survivors else 1


def _grace(cfg: Config, mode: str) -> float:
    return cfg.modes[mode].stop_timeout if mode in cfg.modes else 30.0
