"""The store a reading command (`runs`, `compare`, `report`, `export`) opens: `--db FILE`, `--demo`, or the default."""

from __future__ import annotations

import argparse

from specdash.bench.store import Store, demo_path
from specdash.errors import UsageError


def reader_store(args: argparse.Namespace) -> Store:
    """The store named by `--db` or `--demo` (the demo's), else the default one; never created here: a missing
    file is an error that names it."""
    if getattr(args, "demo", False):
        if not demo_path().exists():
            raise UsageError(f"no demo store at {demo_path()} yet: `specdash demo` writes it (run a sweep there)")
        return Store(demo_path(), create=False)
    return Store(args.db, create=False)
