"""GPU utilisation, memory and power from `nvidia-smi`, polled over the session's connection.

One poll at a time (the next starts `GPU_EVERY_S` after the previous answered), and nothing at all on hosts
without `nvidia-smi`: the dashboard then hides its GPU panel.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from specdash.core.events import GpuSample, GpuStats, SessionEvent
from specdash.remote.host import Host
from specdash.remote.ssherror import SSHError

GPU_EVERY_S = 2.0
"""Seconds between the end of one poll and the start of the next."""
QUERY = "nvidia-smi --query-gpu=index,utilization.gpu,memory.used,memory.total,power.draw --format=csv,noheader,nounits"


def parse_gpus(text: str) -> tuple[GpuSample, ...]:
    """Rows of `QUERY` output -> samples; malformed rows are skipped (`[N/A]` power becomes None)."""
    out = []
    for row in text.splitlines():
        cells = [c.strip() for c in row.split(",")]
        if len(cells) != 5:
            continue
        try:
            index, util, used, total = int(cells[0]), float(cells[1]), float(cells[2]), float(cells[3])
        except ValueError:
            continue
        try:
            power: float | None = float(cells[4])
        except ValueError:
            power = None
        out.append(GpuSample(index, util, used, total, power))
    return tuple(out)


async def poll_gpus(host: Host, emit: Callable[[SessionEvent], None]) -> None:
    """Emit `GpuStats` every `GPU_EVERY_S` while the host has GPUs; return at once when it has none."""
    while True:
        try:
            probe = await host.run("command -v nvidia-smi", timeout=15.0)
            break
        except SSHError:
            await asyncio.sleep(GPU_EVERY_S)
    if not probe.ok:
        return
    while True:
        try:
            result = await host.run(QUERY, timeout=15.0)
            gpus = parse_gpus(result.stdout) if result.ok else ()
            if gpus:
                emit(GpuStats(gpus))
        except SSHError:
            pass
        await asyncio.sleep(GPU_EVERY_S)


async def gpu_inventory(host: Host) -> dict[str, object] | None:
    """The host's GPUs (`{count, models, driver, memory_mib}`) for a run's provenance; None without nvidia-smi."""
    from specdash.bench.provenance import GPU_QUERY, parse_gpu_inventory

    try:
        result = await host.run(f"command -v nvidia-smi >/dev/null 2>&1 && {GPU_QUERY}", timeout=15.0)
    except SSHError:
        return None
    return parse_gpu_inventory(result.stdout) if result.ok else None
