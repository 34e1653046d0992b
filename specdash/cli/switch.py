"""`specdash switch HOST MODE [--wait] [--restart]`: make MODE live. The live server stops, or sleeps when its
mode is resident; a sleeping server of MODE is woken and verified (greedy outputs, accept length) instead of
restarted, and any failure of that falls back to a restart, said in one line with the evidence. A MODE that is
already live (alive, not crashed) is left as it is and said so: `--restart` restarts it."""

from __future__ import annotations

import argparse
import asyncio

from specdash.cli.up import start


def run(args: argparse.Namespace) -> int:
    return asyncio.run(start(args, switch=True))
