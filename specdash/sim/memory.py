"""SGLang's memory release and resume (`/release_memory_occupation`, `/resume_memory_occupation`), as the
simulator answers them, with the faults of `--sim-fault` that break them.

As in SGLang, the routes always exist; what they do depends on the launch flags:

- `--enable-memory-saver`: the GPU memory (weights, KV cache, CUDA graphs) is released; the simulated
  `nvidia-smi` shows each GPU down to what a released server still holds (its CUDA context). Without it
  the answer is 200 and nothing is released (SGLang's memory saver adapter is then a no-op).
- `--enable-weights-cpu-backup` (and `--enable-draft-weights-cpu-backup` for a draft model): the weights
  are copied to host memory first and back on resume. Without it they are gone: a resumed server answers,
  but with garbage weights (its greedy outputs differ from the first token).

A release copies the weights device-to-host and a resume host-to-device over `--sim-h2d-gbps` (per GPU,
all GPUs at once), plus the re-allocation of the KV pool and the graphs; both are scaled by
`--sim-time-scale` like every startup phase. While released, generation is refused (503).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from aiohttp import web

from specdash.sim.gpus import write_sleep

if TYPE_CHECKING:
    from specdash.sim.args import SimConfig
    from specdash.sim.presets import Preset

CONTEXT_GB = 0.55
"""What a released GPU still holds per rank (CUDA context, NCCL buffers, allocator pools)."""
REALLOC_S = 0.35
"""Re-allocating the KV pool and the graphs' memory on resume (no copy: their contents are discarded)."""


class MemoryOccupation:
    """The release/resume state of one simulated server."""

    def __init__(self, config: SimConfig, preset: Preset) -> None:
        self.c = config
        self.p = preset
        self.released = False
        """True between a release and the end of the next resume."""
        self.corrupt = False
        """The weights were lost (no CPU backup, or the `wake-corrupts` fault): greedy outputs are garbage."""
        self.busy = asyncio.Lock()

    def routes(self, app: web.Application) -> None:
        """Add SGLang's two routes (GET or POST, as SGLang's FastAPI app has them)."""
        for method in ("GET", "POST"):
            app.router.add_route(method, "/release_memory_occupation", self.release)
            app.router.add_route(method, "/resume_memory_occupation", self.resume)

    def weights_gb(self) -> float:
        """Weights per GPU that a CPU backup moves (the draft's only with its own backup flag)."""
        gb = self.p.weight_gb if self.c.weights_cpu_backup else 0.0
        if self.c.speculative_draft_model_path and self.c.draft_weights_cpu_backup:
            gb += self.p.draft_gb
        return gb

    def copy_s(self) -> float:
        """Seconds to move the backed-up weights across the host-device link (one direction)."""
        return self.weights_gb() / max(0.1, self.c.h2d_gbps) * self.c.time_scale

    async def release(self, request: web.Request) -> web.Response:
        f = self.c.faults
        if f.sleep_500:
            return _error(
                500, "release_memory_occupation failed: torch_memory_saver pause raised cudaErrorInvalidValue"
            )
        async with self.busy:
            if self.released:
                return _error(400, "memory is already released")
            self.released = True
            if self.c.memory_saver:  # without it SGLang's adapter is a no-op: 200, and nothing released
                await asyncio.sleep(self.copy_s())
                if not f.sleep_holds_memory:
                    write_sleep(CONTEXT_GB * 1031.0)
                if not self.c.weights_cpu_backup:
                    self.corrupt = True  # released without a copy: resumed memory holds no weights
        return web.json_response({"success": True, "message": "Succeeded to release memory occupation."})

    async def resume(self, request: web.Request) -> web.Response:
        f = self.c.faults
        if f.wake_404:
            return web.json_response({"detail": "Not Found"}, status=404)
        if f.wake_500:
            return _error(500, "resume_memory_occupation failed: CUDA error: out of memory")
        async with self.busy:
            if not self.released:
                return _error(400, "memory is not released")
            if f.wake_hangs:
                await asyncio.Event().wait()  # never finishes: the client's deadline ends it
            tic = time.monotonic()
            if self.c.memory_saver:
                await asyncio.sleep(self.copy_s() + REALLOC_S * self.c.time_scale)
            write_sleep(None)
            self.released = False
            if f.wake_corrupts:
                self.corrupt = True
        return web.json_response(
            {"success": True, "message": f"Succeeded to resume memory occupation in {time.monotonic() - tic:.2f} s."}
        )

    def refusal(self) -> web.Response | None:
        """The answer to a generation request while the memory is released, else None."""
        if self.released:
            return _error(503, "The server's memory is released; resume it first.")
        return None


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"success": False, "message": message}, status=status)
