"""What Python 3.9 and 3.10 lack, for the modules the probe agent ships to the host.

The agent (`specdash.bench.agent`) runs the probe's data plane with the host's Python, which is often older
than ours (RHEL 9 and Ubuntu 20.04 have 3.9, Debian 11 has 3.9, Ubuntu 22.04 has 3.10), so every module in
`bundle.MODULES` must run on 3.9. Where they need something newer, it comes from here: on 3.11 and later
each name is the standard one, unchanged; on older Pythons, the nearest honest equivalent, said below.
Everything else in specdash requires 3.11 and uses the standard names directly.
"""

from __future__ import annotations

import enum
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: reading samples (`specdash runs`) imports no asyncio
    import asyncio

__all__ = ["SLOTS", "StrEnum", "uncancel"]

if sys.version_info >= (3, 11):
    from enum import StrEnum  # novermin (vermin does not read the version check)
else:

    class StrEnum(str, enum.Enum):
        """`enum.StrEnum` (3.11): members are strings, and `str()` and `format()` give the value."""

        def __str__(self) -> str:
            return str.__str__(self)


SLOTS: dict[str, Any] = {"slots": True} if sys.version_info >= (3, 10) else {}
"""`@dataclass(..., **SLOTS)`: `__slots__` where `dataclass` can make them (3.10); a `__dict__` before."""


def uncancel(task: asyncio.Task[Any] | None) -> int:
    """`task.uncancel()` (3.11): the cancellation requests still pending after taking back ours.

    Before 3.11 a task does not count its cancellations, so one requested by someone else at the same moment
    cannot be told apart from ours: 0 (the cancellation is taken as ours). The probe only cancels a request
    for its own time limits, and the agent stops a level by `Probe.stop`, never by cancelling it, so there
    the answer is exact.
    """
    if task is None:
        return 0
    if sys.version_info >= (3, 11):
        return task.uncancel()
    return 0
