"""specdash's sweep against the simulator, whose ground truth is known: aggregate tok/s vs the model.

Run: .venv/bin/python benchmarks/probe_accuracy.py [--levels 1,2,5,10,20,50,100,256] [--duration 8]
     [--one-shot [--output-len 256]] [--modes baseline,eagle3]

For baseline and EAGLE-3 this starts one `specdash sim` (Kimi preset, TP 8, short startup, real decode
timing) and runs `run_sweep` (the same code as `specdash bench`) with duration-based levels, on loopback.
It prints the sweep's steady-state aggregate tok/s next to the model's expected aggregate
(`ThroughputModel.expected_aggregate`). Baseline decoding is deterministic, so its difference is the
measurement error (the probe's plus the simulator's timing error); EAGLE-3's also holds the simulator's seeded
acceptance draws, which scatter around the model's mean by a few percent at low C.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from specdash.bench.probe import ProbeSettings
from specdash.bench.prompts import load_prompts
from specdash.bench.sweep import LevelResult, SweepConfig, run_sweep
from specdash.sim.model import SPEC_MAX_RUNNING, ThroughputModel, baseline_model
from specdash.sim.spec_space import DraftShape, step_cost

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ (the simulator harness)
from specdash.ports import free_port  # noqa: E402
from tests.support.sim_harness import SimProcess  # noqa: E402

EAGLE = [
    "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/models/eagle3",
    "--speculative-num-steps", "2", "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "16",
]  # fmt: skip
SHAPE = DraftShape(2, 4, 16)
EAGLE_MODEL = ThroughputModel(spec=step_cost("EAGLE3", SHAPE), num_steps=SHAPE.depth, max_running=SPEC_MAX_RUNNING)
"""What the simulator runs for EAGLE's flags (its acceptance and cost follow the draft shape: sim/spec_space.py)."""


async def measure(
    mode: str, levels: tuple[int, ...], duration: float, one_shot: bool, output_len: int = 512
) -> list[tuple[int, float, float, float | None, bool]]:
    port = free_port()
    args = ["--model-path", "/models/kimi", "--tp", "8", "--port", str(port), "--sim-time-scale", "0.005",
            "--enable-metrics", *(EAGLE if mode == "eagle3" else [])]  # fmt: skip
    model = EAGLE_MODEL if mode == "eagle3" else baseline_model()
    async with SimProcess(args) as sim:
        await sim.wait_for("The server is fired up and ready to roll!", timeout=60)
        prompts = load_prompts("chat")
        url = f"http://127.0.0.1:{port}"
        if one_shot:
            # One long request per stream: the steady-state window (all C streams decoding) holds no prefill,
            # so the model's pure-decode aggregate is the ground truth to compare with.
            levels_done: list[LevelResult] = []
            for c in levels:
                config = SweepConfig(
                    mode=mode, levels=(c,), requests_per_level=c, settings=ProbeSettings(output_len=output_len)
                )
                levels_done += (await run_sweep(url, config, prompts)).levels
        else:
            # Closed loop: new requests (with their prefill) keep arriving, as in a real sweep.
            config = SweepConfig(mode=mode, levels=levels, duration_s=duration, settings=ProbeSettings(output_len=128))
            levels_done = list((await run_sweep(url, config, prompts)).levels)
    rows = []
    for level in levels_done:
        c = level.concurrency
        expected = model.expected_aggregate(c)
        # EAGLE-3's acceptance is drawn (seeded): the model at the acceptance the level really got (the mean
        # of the requests' `spec_accept_length`, SGLang's tokens per verify step) isolates the probe's error.
        accept = level.stats.accept_length
        realized = None
        if mode == "eagle3" and accept:
            realized = expected * accept / model.mean_tokens_per_step(min(c, model.max_running))
        rows.append((c, level.stats.output_tok_s, expected, realized, level.client_limited))
    return rows


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--levels", default="1,2,5,10,20,50,100")
    parser.add_argument("--duration", type=float, default=6.0)
    parser.add_argument("--one-shot", action="store_true", help="one long request per stream per level")
    parser.add_argument("--output-len", type=int, default=512, help="tokens per one-shot request (default 512)")
    parser.add_argument("--modes", default="baseline,eagle3")
    args = parser.parse_args()
    levels = tuple(int(x) for x in args.levels.split(","))
    print("| mode | C | specdash tok/s | model tok/s | difference | model at the realized accept len | difference "
          "| client-limited |")  # fmt: skip
    print("|---|--:|--:|--:|--:|--:|--:|---|")
    for mode in args.modes.split(","):
        rows = await measure(mode, levels, args.duration, args.one_shot, args.output_len)
        for c, measured, expected, realized, limited in rows:
            diff = 100 * (measured / expected - 1) if expected else float("nan")
            real = f"{realized:.1f} | {100 * (measured / realized - 1):+.2f} %" if realized else "– | –"
            print(f"| {mode} | {c} | {measured:.1f} | {expected:.1f} | {diff:+.2f} % | {real} "
                  f"| {'yes' if limited else 'no'} |")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
