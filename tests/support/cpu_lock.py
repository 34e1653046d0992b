"""One machine, several pytest-xdist workers: tests that load every core themselves run alone.

Most of the suite waits on real processes, sockets and simulated time, so `make test` runs more workers than
the machine has cores. A test marked `exclusive_cpu` (it starts a CPU hog of its own, or holds the machine to a
responsiveness bound) would then measure the other workers' tests, not specdash: it takes the machine alone.
Every other test holds a shared lock; an exclusive test waits until the tests in flight are done and holds
new ones back until it ends. A gate lock in front gives the exclusive test priority (plain `flock` would
let a stream of shared holders starve it). Outside xdist there is one process and nothing to take.

The lock is held around a test's setup, call and teardown (`pytest_runtest_protocol` in tests/conftest.py), so
an exclusive test's fixtures start alone too, and the wait for the lock is in no phase's reported duration.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

EXCLUSIVE_ENV = "SPECDASH_TEST_CPU_EXCLUSIVE"
"""Set while this worker's test holds the machine alone (cpu_hog checks it)."""


def _paths() -> tuple[Path, Path] | None:
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run or int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1) < 2:
        return None
    base = Path(tempfile.gettempdir()) / f"specdash-tests-cpu-{run}"
    return base.with_suffix(".gate"), base.with_suffix(".lock")


def under_workers() -> bool:
    """Whether other xdist workers share this machine."""
    return _paths() is not None


@contextlib.contextmanager
def hold(exclusive: bool) -> Iterator[None]:
    """Hold the machine shared (with the other workers' plain tests) or alone, for the block."""
    paths = _paths()
    if paths is None:
        yield
        return
    gate_path, lock_path = paths
    with open(gate_path, "a") as gate, open(lock_path, "a") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            if not exclusive:
                fcntl.flock(gate, fcntl.LOCK_UN)
        if exclusive:
            os.environ[EXCLUSIVE_ENV] = "1"
        try:
            yield
        finally:
            os.environ.pop(EXCLUSIVE_ENV, None)
            fcntl.flock(lock, fcntl.LOCK_UN)
            if exclusive:
                fcntl.flock(gate, fcntl.LOCK_UN)
