"""`specdash switch HOST MODE [--wait]`: stop the live server (if any), then start MODE."""

from __future__ import annotations

import argparse
import asyncio

from specdash.cli._host import add_host_arguments
from specdash.cli.up import start

NAME = "switch"
HELP = "stop the running server (if any) and start another mode; run history stays on the host"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_host_arguments(parser)
    parser.add_argument("mode", metavar="MODE", help="a mode from the config")
    parser.add_argument("--wait", action="store_true", help="print phases until ready (exit 0) or crashed (exit 1)")


def run(args: argparse.Namespace) -> int:
    return asyncio.run(start(args, switch=True))
