"""Stream a fast command's output over SSH with a slow reader, in a process of its own, and print what that
added to the process's resident memory at its peak (`tests.support.peak_rss`), as JSON.

Why a process of its own: a test worker's heap carries what its earlier tests allocated and freed, and glibc's
dynamic mmap threshold (raised by every large block freed before) decides whether a multi-megabyte read comes
from a fresh mapping or from that heap. The same stream added 14 MB in a fresh process and 17.9 MB in a worker
that had run a hundred tests (ci28). A fresh interpreter measures the stream, not the worker's history.

    python -m tests.support.stream_memory TARGET IDENTITY KNOWN_HOSTS SSH_CONFIG TOTAL_BYTES
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from specdash.remote.ssh import SSHHost, SSHOptions
from tests.support.peak_rss import peak_rss

PAUSE_S = 0.002
"""The slow consumer's pause per piece: the load being modelled, not synchronisation."""


async def stream(target: str, options: SSHOptions, total: int) -> dict[str, int]:
    got = 0
    async with SSHHost(target, options) as host:
        await host.run("true")  # connected and authenticated before the measure starts
        with peak_rss() as memory:
            async for chunk in host.stream_bytes(f"exec head -c {total} /dev/zero"):
                got += len(chunk)
                await asyncio.sleep(PAUSE_S)
    return {"got": got, "peak_added": memory.added}


def main(argv: list[str]) -> int:
    target, identity, known_hosts, config, total = argv
    options = SSHOptions(
        identity_files=(Path(identity),),
        known_hosts=Path(known_hosts),
        ssh_config=Path(config),
        use_agent=False,
        connect_timeout=5.0,
    )
    print(json.dumps(asyncio.run(stream(target, options, int(total)))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
