"""`specdash switch HOST MODE [--wait]`: stop the live server (if any), then start MODE."""

from __future__ import annotations

import argparse
import asyncio

from specdash.cli.up import start


def run(args: argparse.Namespace) -> int:
    return asyncio.run(start(args, switch=True))
