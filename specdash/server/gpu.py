"""GPU utilisation, memory and power from `nvidia-smi`, polled over the session's connection; the GPU
inventory and the draft model's architecture for a run's provenance.

One poll at a time (the next starts `GPU_EVERY_S` after the previous answered), and nothing at all on hosts
without `nvidia-smi`: the dashboard then hides its GPU panel.
"""

from __future__ import annotations

import asyncio
import json
import shlex
from collections.abc import Callable

from specdash.config import ModeConfig
from specdash.core.events import GpuSample, GpuStats, SessionEvent
from specdash.remote.host import Host
from specdash.remote.ssherror import SSHError
from specdash.safetext import escape_controls

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


_DRAFT_FLAGS = ("--speculative-draft-model-path", "--speculative-draft-model", "--speculative-model")


async def draft_architectures(host: Host, mode: ModeConfig) -> list[str]:
    """The `architectures` of the mode's draft model, read from its `config.json` on the host when the draft is
    a local directory (a hub id is not fetched); empty when unknown."""
    args = list(mode.args)
    path = ""
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if name in _DRAFT_FLAGS:
            path = value if eq else (args[i + 1] if i + 1 < len(args) else "")
    if not path:
        return []
    config = shlex.quote(path.rstrip("/") + "/config.json")
    try:
        result = await host.run(f"test -f {config} && head -c 65536 {config}", timeout=15.0)
    except SSHError:
        return []
    if not result.ok:
        return []
    try:
        archs = json.loads(result.stdout).get("architectures") or []
    except (ValueError, AttributeError):
        return []
    return [escape_controls(a) for a in archs if isinstance(a, str)]
