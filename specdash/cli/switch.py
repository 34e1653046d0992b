"""`specdash switch HOST MODE [--wait] [--restart]`: make MODE live. The live server stops, or sleeps when its
mode is resident; a sleeping server of MODE is woken and verified (greedy outputs, accept length) instead of
restarted, and any failure of that falls back to a restart, said in one line with the evidence."""

from __future__ import annotations

import argparse
import asyncio

from specdash.cli._host import add_host_arguments
from specdash.cli.up import start

NAME = "switch"
HELP = (
    "make another mode live: the running server stops (or sleeps, if resident) and the mode starts "
    "(or wakes, verified, if it sleeps); run history stays on the host"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_host_arguments(parser)
    parser.add_argument("mode", metavar="MODE", help="a mode from the config")
    parser.add_argument("--wait", action="store_true", help="print phases until ready (exit 0) or crashed (exit 1)")
    parser.add_argument("--restart", action="store_true", help="restart MODE even if a server of it sleeps")


def run(args: argparse.Namespace) -> int:
    return asyncio.run(start(args, switch=True))
