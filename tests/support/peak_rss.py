"""The peak resident memory a block of code added to this process, read from the kernel.

Why not `tracemalloc`: it sees only Python's own allocations (not the C buffers of asyncssh, cryptography or
the SSL layer), and it slows every allocation: the startup tracker needs about five times the CPU per line
under it (`benchmarks/tracker_throughput.py --tracemalloc`), so the log flood's watcher fell behind a 30 s flood
(73 s) where the one users run keeps up (30.4 s), and the test measured the slower one. The kernel's
high-water mark covers every byte the process holds in RAM.

How: free what can be freed first (a full garbage collection, then glibc's `malloc_trim(0)`, which hands free
heap pages back to the kernel), so that memory an earlier test of this worker freed cannot absorb the block's
growth unseen; reset the high-water mark (`/proc/self/clear_refs` with `5`, Linux 4.0 and later); read
`VmRSS` as the base; after the block, `VmHWM` minus the base is the peak the block added.
"""

from __future__ import annotations

import ctypes
import gc
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

_STATUS = Path("/proc/self/status")


def _kib(field: str) -> int:
    m = re.search(rf"^{field}:\s+(\d+) kB", _STATUS.read_text(), re.MULTILINE)
    assert m is not None, f"no {field} in {_STATUS}"
    return int(m.group(1))


@dataclass
class PeakRss:
    base: int = 0
    """Resident bytes when the block began (after freeing what could be freed)."""
    peak: int = 0
    """The block's high-water mark of resident bytes."""

    @property
    def added(self) -> int:
        """Bytes the block added at its peak."""
        return max(0, self.peak - self.base)


@contextmanager
def peak_rss() -> Iterator[PeakRss]:
    """Measure the resident memory a block adds at its peak (`PeakRss.added`, filled in when it ends)."""
    gc.collect()
    ctypes.CDLL(None).malloc_trim(0)
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current VmRSS
    result = PeakRss(base=_kib("VmRSS") * 1024)
    try:
        yield result
    finally:
        result.peak = _kib("VmHWM") * 1024
