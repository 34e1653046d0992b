"""A CPU hog for tests that must hold on a loaded machine: one busy process per usable core.

Bounded twice: each process ends by itself after `seconds`, and the context manager kills the ones it
started (by PID, never by name) when the test is done.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.support import cpu_lock


def _idle_and_hogged(*, idle_alone: bool) -> pytest.MarkDecorator:
    exclusive = pytest.mark.exclusive_cpu
    return pytest.mark.parametrize(
        "hog",
        [
            pytest.param(False, id="idle", marks=[exclusive] if idle_alone else []),
            pytest.param(True, id="cpu-hog", marks=exclusive),
        ],
    )


IDLE_AND_HOGGED = _idle_and_hogged(idle_alone=False)
"""Run a test twice: beside the other workers' tests (`hog` False), and alone with a busy process on every core
that the test starts and stops (`hog` True: `cpu_hog(hog)`; `exclusive_cpu` gives it the machine)."""

ALONE_IDLE_AND_HOGGED = _idle_and_hogged(idle_alone=True)
"""`IDLE_AND_HOGGED` for a test that holds a responsiveness bound: both runs have the machine alone, the idle one
on an idle machine. Beside five other workers and two outside CPU hogs (ci25) the dashboard's idle flood test
measured the workers, not specdash: one key of 57 took 2.87 s."""

_LOOP = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


def usable_cores() -> int:
    """The cores this process may run on (its affinity), at least 1."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@contextlib.contextmanager
def cpu_hog(enabled: bool = True, *, seconds: float = 300.0) -> Iterator[list[int]]:
    """Keep every usable core busy while the block runs (at most `seconds`); yields the hog PIDs."""
    if not enabled:
        yield []
        return
    if cpu_lock.under_workers() and not os.environ.get(cpu_lock.EXCLUSIVE_ENV):
        # Beside other workers' tests the hog would load them, and they it: mark the test `exclusive_cpu`.
        raise RuntimeError("cpu_hog needs the machine alone: mark the test @pytest.mark.exclusive_cpu")
    code = _LOOP.format(seconds=float(seconds))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(usable_cores())
    ]
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
