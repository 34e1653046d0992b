"""The startup advisor's predicted saving against the measured one, on restarts of the simulator over the demo's
embedded SSH host: for each mode, a start; the advisor's graph advice on its log; a restart with that flag
applied; the saving measured from the two logs (`core.advisor.measured_saving`). Simulated durations are
scaled by --time-scale; the table gives the seconds as measured and as they would be at scale 1.

    .venv/bin/python benchmarks/advisor_savings.py [--time-scale 0.05] [--max-concurrency 32]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
from dataclasses import replace
from pathlib import Path

from specdash.cli.demo_session import demo_session
from specdash.core.advisor import measured_saving
from specdash.errors import SpecdashError
from specdash.phases import Phase
from specdash.server.remote_session import RemoteSession, running


async def one(session: RemoteSession, mode: str, used: int) -> tuple[str, float, float, float] | None:
    """Start `mode`, advise, restart it with the advised flag; (flag, predicted, measured, total before)."""
    await session.switch(mode)
    await session.wait_status((Phase.READY,), timeout=1800)
    record = await session.lifecycle.current()
    assert record is not None
    before = await session.advise(record, used)
    graphs = [a for a in before.advice if a.flag.startswith("--cuda-graph-max-bs")]
    if not graphs:
        print(f"{mode}: no graph advice at max concurrency {used}")
        return None
    advice = graphs[0]
    cfg = session.config.modes[mode]
    applied = replace(cfg, name=f"{mode}-advised", args=(*cfg.args, *advice.flag.split()))
    session.config = replace(session.config, modes={**session.config.modes, applied.name: applied})
    await session.switch(applied.name)
    await session.wait_status((Phase.READY,), timeout=1800)
    record = await session.lifecycle.current()
    assert record is not None
    after = await session.advise(record, used)
    return advice.flag, advice.saving_s, measured_saving(before, after, advice), before.total_s or 0.0


async def main(time_scale: float, used: int) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        async with demo_session(time_scale, db=Path(tmp) / "bench.db") as demo, running(demo.session) as session:
            for mode in ("baseline", "eagle3"):
                row = await one(session, mode, used)
                if row is not None:
                    rows.append((mode, *row))
            with contextlib.suppress(SpecdashError):
                await session.stop()
    print(f"\nsimulator (Kimi-K2.5 TP=8 preset) at --time-scale {time_scale:g}, sweeps up to C={used}")
    print(
        "| mode | advice | start before (s) | predicted saving (s) | measured saving (s) | at scale 1: pred. / meas. |"
    )
    print("|---|---|--:|--:|--:|--:|")
    for mode, flag, predicted, measured, total in rows:
        print(
            f"| {mode} | `{flag}` | {total:.1f} | {predicted:.1f} | {measured:.1f} | "
            f"{predicted / time_scale:.0f} / {measured / time_scale:.0f} |"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-scale", type=float, default=0.05)
    parser.add_argument("--max-concurrency", type=int, default=32)
    args = parser.parse_args()
    asyncio.run(main(args.time_scale, args.max_concurrency))
