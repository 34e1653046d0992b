"""Follow a remote log file from a byte offset, across reconnects, without losing or repeating a line.

The remote side is `tail -c +OFFSET -F FILE` (follows by name, so rotation is followed too). Only complete
lines count: the offset advances past a line's terminator only once that terminator has arrived, so a
line cut by a dropped connection is re-read whole from the next connection. A trailing `\\r` is held back
until the next byte shows whether it is a `\\r\\n` pair.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import AsyncIterator

from specdash.core.lines import complete_length, split_lines
from specdash.remote.ssh import SSHHost
from specdash.remote.ssherror import SSHError

RETRY_S = 0.5
"""Pause before re-opening a stream that failed or ended."""


class LogFollower:
    """Yields batches of complete lines of a remote file; `offset` is the bytes consumed so far."""

    def __init__(self, host: SSHHost, path: str, offset: int = 0) -> None:
        self.host = host
        self.path = path
        self.offset = offset
        """Bytes of the file already delivered as complete lines."""

    def command(self) -> str:
        """The remote command for the current offset (tail's own complaints are dropped, not logged)."""
        return f"exec tail -c +{self.offset + 1} -F {shlex.quote(self.path)} 2>/dev/null"

    async def batches(self) -> AsyncIterator[list[str]]:
        """Complete lines, in order, as they arrive; survives reconnects. Runs until cancelled."""
        while True:
            await self.host.wait_connected()
            pending = b""
            try:
                async for chunk in self.host.stream_bytes(self.command()):
                    pending += chunk
                    n = complete_length(pending)
                    if n:
                        complete, pending = pending[:n], pending[n:]
                        self.offset += n
                        yield split_lines(complete.decode("utf-8", errors="replace"))
            except SSHError:
                # The connection may still look up for a moment after it died: back off so the supervisor
                # can notice, instead of spinning on failing channel opens.
                await asyncio.sleep(RETRY_S)
                continue
            # tail ended by itself (its file's directory vanished, or it was killed): retry after a pause.
            await asyncio.sleep(RETRY_S)
