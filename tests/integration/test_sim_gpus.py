"""The simulator's `nvidia-smi`: the query specdash makes, answered from what a real simulator's ranks hold
(memory by startup phase, utilisation by load), and idle again once the processes are gone."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import aiohttp

from specdash.core.events import GpuSample
from specdash.server.gpu import QUERY, parse_gpus
from specdash.sim.gpus import COUNT_ENV, DIR_ENV, NAME, TOTAL_MIB, install
from tests.support.eventually import eventually
from tests.support.ports import free_port
from tests.support.sim_harness import SimProcess, stream_generate

READY = "The server is fired up and ready to roll!"


def nvidia_smi(bin_dir: Path, env: dict[str, str], query: str = QUERY) -> tuple[GpuSample, ...]:
    """Run the installed script as specdash's poll does: by name, through PATH."""
    full = {**os.environ, **env, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    out = subprocess.run(["bash", "-c", query], capture_output=True, text=True, env=full, timeout=30, check=True)
    return parse_gpus(out.stdout)


async def test_memory_follows_the_startup_and_utilisation_the_load(tmp_path: Path) -> None:
    env = {DIR_ENV: str(tmp_path / "gpus"), COUNT_ENV: "4"}
    bin_dir = tmp_path / "bin"
    install(bin_dir)
    idle = nvidia_smi(bin_dir, env)
    assert [g.index for g in idle] == [0, 1, 2, 3]
    assert all(g.util_pct == 0 and g.mem_used_mib < 10 and g.mem_total_mib == TOTAL_MIB for g in idle)

    port = free_port()
    args = ["--model-path", "/models/kimi", "--tp", "2", "--port", str(port), "--sim-time-scale", "0.02"]
    async with SimProcess(args, env=env) as sim:
        await sim.wait_for("Load weight begin", 30)
        during: list[tuple[GpuSample, ...]] = []
        seen_ready = False

        def sample() -> str:
            during.append(nvidia_smi(bin_dir, env))
            return sim.lines[-1] if sim.lines else ""

        await eventually(sample, until=lambda _: READY in sim.raw, timeout=60, what="ready (last line)", interval=0.1)
        seen_ready = True
        ready = nvidia_smi(bin_dir, env)
        # TP=2: GPUs 0 and 1 hold weights and the KV pool (most of the card), 2 and 3 stay idle.
        assert all(g.mem_used_mib > 0.5 * g.mem_total_mib for g in ready[:2]), ready
        # One GPU model throughout: a loaded GPU reports the same total as an idle one (issue 26).
        assert all(g.mem_total_mib == TOTAL_MIB for g in ready), ready
        assert all(g.mem_used_mib < 10 for g in ready[2:]), ready
        # While loading, GPU memory was on its way up: some sample held less than the final amount.
        assert any(0 < s[0].mem_used_mib < ready[0].mem_used_mib for s in during), during
        assert ready[0].util_pct < 10  # up, but nothing to do

        async with aiohttp.ClientSession() as session:
            streams = [asyncio.ensure_future(stream_generate(session, port, 400)) for _ in range(8)]
            await eventually(
                lambda: nvidia_smi(bin_dir, env), until=lambda gpus: gpus[0].util_pct > 80, timeout=30,
                what="GPU 0 busy above 80 %", interval=0.1,
            )  # fmt: skip
            busy = nvidia_smi(bin_dir, env)
            assert busy[0].power_w is not None and busy[0].power_w > ready[0].power_w + 100  # type: ignore[operator]
            await asyncio.gather(*streams)
    assert seen_ready
    # Every process of the simulator is gone: nothing holds the GPUs any more.
    await eventually(
        lambda: nvidia_smi(bin_dir, env), until=lambda gpus: all(g.mem_used_mib < 10 for g in gpus), timeout=15,
        what="every GPU's memory freed", interval=0.1,
    )  # fmt: skip


def test_unknown_field_and_plain_table(tmp_path: Path) -> None:
    env = {**os.environ, DIR_ENV: str(tmp_path), COUNT_ENV: "2"}
    bad = subprocess.run(
        [sys.executable, "-m", "specdash.sim.gpus", "--query-gpu=index,bogus", "--format=csv"],
        capture_output=True, text=True, env=env, timeout=30,
    )  # fmt: skip
    assert bad.returncode == 2 and 'Field "bogus" is not a valid field to query.' in bad.stdout
    header = subprocess.run(
        [sys.executable, "-m", "specdash.sim.gpus", "--query-gpu=index,memory.used,power.draw", "--format=csv"],
        capture_output=True, text=True, env=env, timeout=30,
    )  # fmt: skip
    lines = header.stdout.splitlines()
    assert lines[0] == "index, memory.used [MiB], power.draw [W]" and lines[1] == "0, 1 MiB, 35.00 W"
    listing = subprocess.run(
        [sys.executable, "-m", "specdash.sim.gpus", "-L"], capture_output=True, text=True, env=env, timeout=30
    )
    assert listing.stdout.startswith(f"GPU 0: {NAME} (UUID: GPU-")
