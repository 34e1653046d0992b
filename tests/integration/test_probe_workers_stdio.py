"""Probe processes start under the dashboard, where sys.stdout/sys.stderr have no usable file descriptor."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import asyncio, io, sys
from specdash.bench.probe import ProbeSettings
from specdash.bench.workers import ProbePool

class NoFd(io.StringIO):
    def fileno(self):  # what Textual's stand-ins answer
        return -1

async def main():
    pool = ProbePool("http://127.0.0.1:9", ProbeSettings(), ("hello",))
    await pool.ensure(1)
    print(pool.size, file=sys.__stdout__)
    await pool.close()

if __name__ == "__main__":
    sys.stdout, sys.stderr = NoFd(), NoFd()
    asyncio.run(main())
"""


def test_workers_start_when_stdio_has_no_file_descriptor() -> None:
    # Under Textual, spawn used to fail with "bad value(s) in fds_to_keep" (the resource tracker passes
    # sys.stderr's descriptor on), and every sweep started from the dashboard failed. A fresh interpreter,
    # because the resource tracker starts once per process.
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "1"
