"""ETA error at each phase boundary over several real-timing starts of the simulator (different seeds).

Two ways, both through specdash's own session over a loopback sshd (run as root):

- `--live` (sequential): each start is estimated from the starts before it, and the table shows the ETA
  the session itself published at each phase boundary (`ServerStatus.eta_remaining`, the number the
  dashboard and `up --wait` show). N starts take N times a start.
- default (parallel): N starts at once (one host state dir and port each); then, for every start, the
  ETA at each of its phase boundaries is computed by `core.eta.estimate` (the function the watcher calls)
  from the other N-1 starts' phase timings (leave-one-out), with this start's finished phases and
  0 s in the new phase: what the live ETA would have said with those N-1 starts as history. A 9-minute
  start costs 9 minutes for all N.

Errors are ETA minus the real time left (positive: too pessimistic); "within spread" counts boundaries
where |error| <= 2 x the spread the ETA showed.

    .venv/bin/python benchmarks/eta_error.py --runs 6 --mode eagle3            # ~9 min, kimi-k2.5 preset
    .venv/bin/python benchmarks/eta_error.py --runs 6 --mode small --live      # 28 s starts, sequential
    .venv/bin/python benchmarks/eta_error.py --from-logs START.log ...          # real starts, by their logs

`--from-logs` takes the phase boundaries of real starts (e.g. the vLLM CPU engine's full logs) from the logs'
own clock through `specdash.core.timeline` (what `specdash replay` reads; 1 s resolution for vLLM), keeps the
starts that reached ready, and evaluates them leave-one-out with the engine's phase order.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._remote import loopback_sshd  # noqa: E402
from specdash.bench.store import Store  # noqa: E402
from specdash.config import Config, HostConfig  # noqa: E402
from specdash.core.eta import Estimate, estimate  # noqa: E402
from specdash.core.events import ServerStatus  # noqa: E402
from specdash.core.timeline import replay_file  # noqa: E402
from specdash.engines.registry import make_rules  # noqa: E402
from specdash.phases import SETTLED, Phase  # noqa: E402
from specdash.ports import free_port  # noqa: E402
from specdash.remote.ssh import SSHHost, SSHOptions  # noqa: E402
from specdash.server.remote_session import RemoteSession, running  # noqa: E402
from tests.support.remote_sim import sim_config  # noqa: E402
from tests.support.sshd import TEST_USER, Sshd  # noqa: E402

Boundary = tuple[Phase, float, float | None, float | None]
"""(phase entered, seconds since launch, ETA shown then, spread shown then)."""


def seeded_config(directory: Path, port: int, seed: int, mode: str) -> Config:
    """The simulator modes, plus `run` = `mode` with its own seed (the last `--sim-seed` wins)."""
    small = '[modes.small]\nextends = "baseline"\nmodel = "/models/Llama-3.1-8B-Instruct"\n'
    extra = f'{small}\n[modes.run]\nextends = "{mode}"\nargs = ["--sim-seed", "{seed}"]\n'
    return sim_config(directory, port=port, time_scale=1.0, tp=2, extra_modes=extra)


async def one_start(
    server: Sshd, options: SSHOptions, directory: Path, seed: int, mode: str, store: Store | None
) -> list[Boundary]:
    """One start of `mode` with `seed` to ready; its phase boundaries (ready last), then stop it."""
    sub = directory / f"seed{seed}"
    sub.mkdir()
    cfg = seeded_config(sub, free_port(), seed, mode)
    address = f"{TEST_USER}@{server.listen}:{server.port}"
    # The same host and mode name for every start, so a live run's history is the starts before it.
    host_cfg = HostConfig(name="eta-host", address=address, state_dir=f"~/.specdash-bench/{uuid.uuid4().hex}")
    boundaries: list[Boundary] = []
    t0 = time.time()

    def listen(event: object) -> None:
        if isinstance(event, ServerStatus) and (event.phase.is_startup or event.phase is Phase.READY):
            if not boundaries or boundaries[-1][0] is not event.phase:
                boundaries.append((event.phase, time.time() - t0, event.eta_remaining, event.eta_spread))

    session = RemoteSession(SSHHost(address, options), host_cfg, cfg, store=store)
    async with running(session, listen) as live:
        t0 = time.time()
        await live.start("run")
        final = await live.wait_status(SETTLED, timeout=3600)
        if final.phase is not Phase.READY:
            raise SystemExit(f"seed {seed}: the start did not reach ready: {final.phase} {final.crash}")
        await live.stop()
        await live.host.run(f"rm -rf {host_cfg.state_dir}")
    return boundaries


def durations(boundaries: list[Boundary]) -> dict[str, float]:
    """Phase name -> seconds, from consecutive boundaries."""
    return {p.value: boundaries[i + 1][1] - at for i, (p, at, _, _) in enumerate(boundaries[:-1])}


def ratio_rule(
    history: list[dict[str, float]], finished: dict[Phase, float], current: Phase, order: tuple[Phase, ...]
) -> float:
    """The rule this replaced, for comparison only: the rest scaled by (actual / median) of the finished
    phases, clamped to [0.5, 2] (a short noisy phase scales the whole rest)."""
    medians = {
        p: statistics.median(h[p.value] for h in history if p.value in h)
        for p in order
        if any(p.value in h for h in history)
    }
    expected = sum(medians.get(p, 0.0) for p in finished)
    scale = 1.0 if expected <= 0 else max(0.5, min(2.0, sum(finished.values()) / expected))
    rest = [p for p in order[order.index(current) :] if p is not Phase.READY]
    return sum(medians.get(p, 0.0) for p in rest) * scale


def leave_one_out(
    runs: list[list[Boundary]], order: tuple[Phase, ...], *, old: bool = False, late_launch: float = 0.0
) -> list[list[Boundary]]:
    """Each run's boundaries with the ETA `estimate` gives from the other runs' timings (`old`: the ratio
    rule it replaced); `late_launch` adds seconds to this run's launching phase (a noisy short phase)."""
    out = []
    for i, run in enumerate(runs):
        history = [durations(other) for j, other in enumerate(runs) if j != i]
        if late_launch:
            run = [run[0], *[(p, at + late_launch, eta, sp) for p, at, eta, sp in run[1:]]]
        marked: list[Boundary] = []
        finished: dict[Phase, float] = {}
        for k, (phase, at, _, _) in enumerate(run):
            if phase is Phase.READY:
                e = None
            elif old:
                e = Estimate(ratio_rule(history, finished, phase, order), 0.0, len(history)) if history else None
            else:
                e = estimate(history, dict(finished), phase, 0.0, None, order)
            marked.append((phase, at, e.remaining if e else None, e.spread if e else None))
            if k + 1 < len(run):
                finished[phase] = run[k + 1][1] - at
        out.append(marked)
    return out


def report(runs: list[list[Boundary]], title: str) -> None:
    print(f"\n{title}")
    print("| phase (entered) | starts | real time left, s (mean) | mean abs error, s | worst error, s |"
          " mean abs error, % of left | within 2x spread |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|")
    phases: dict[Phase, list[tuple[float, float, float | None]]] = {}
    for run in runs:
        ready = run[-1][1]
        for phase, at, eta, spread in run[:-1]:
            if eta is not None:
                phases.setdefault(phase, []).append((eta - (ready - at), ready - at, spread))
    for phase, rows in phases.items():
        errors = [e for e, _, _ in rows]
        left = statistics.mean(r for _, r, _ in rows)
        pct = statistics.mean(abs(e) / r * 100 for e, r, _ in rows if r > 0)
        within = sum(1 for e, _, s in rows if s is not None and abs(e) <= 2 * s)
        worst = max(errors, key=abs)
        print(
            f"| {phase.value} | {len(rows)} | {left:.1f} | {statistics.mean(abs(e) for e in errors):.1f} |"
            f" {worst:+.1f} | {pct:.1f} | {within}/{len(rows)} |"
        )
    totals = [run[-1][1] for run in runs]
    print(f"\nready after (s): {', '.join(f'{t:.1f}' for t in totals)}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=6, help="starts (seeds 1..N); at least 6 for 5 estimated")
    parser.add_argument("--mode", default="eagle3", help="eagle3 (kimi-k2.5 preset, ~8 min) or small (~28 s)")
    parser.add_argument("--live", action="store_true", help="sequential, the ETA the session published")
    parser.add_argument("--save", type=Path, help="write the starts' phase boundaries to this JSON file")
    parser.add_argument("--load", type=Path, help="evaluate saved boundaries instead of starting anything")
    parser.add_argument("--from-logs", nargs="+", type=Path, metavar="LOG", help="evaluate real starts' logs")
    args = parser.parse_args()
    if args.from_logs:
        engine, runs = boundaries_from_logs(args.from_logs)
        evaluate(runs, make_rules(engine).startup_order, f"{engine}: {len(runs)} real starts (log clock)")
        return
    order = make_rules("sglang").startup_order
    if args.load:
        runs = [[(Phase(p), at, eta, sp) for p, at, eta, sp in run] for run in json.loads(args.load.read_text())]
        evaluate(runs, order, f"{args.load.name}: {len(runs)} starts")
        return
    with tempfile.TemporaryDirectory() as tmp, loopback_sshd() as (server, options):
        directory = Path(tmp)
        began = time.time()
        if args.live:
            store = Store(directory / "store.db")
            runs = [
                await one_start(server, options, directory, seed, args.mode, store) for seed in range(1, args.runs + 1)
            ]
            report(runs[1:], f"live: {args.mode}, {args.runs} starts, each estimated from the ones before it")
        else:
            starts = [one_start(server, options, directory, seed, args.mode, None) for seed in range(1, args.runs + 1)]
            runs = list(await asyncio.gather(*starts))
            evaluate(runs, order, f"{args.mode}, {args.runs} parallel starts")
        print(f"wall time {time.time() - began:.0f} s")
        if args.save:
            args.save.write_text(json.dumps([[(p.value, at, eta, sp) for p, at, eta, sp in run] for run in runs]))


def boundaries_from_logs(paths: list[Path]) -> tuple[str, list[list[Boundary]]]:
    """Each log that reached ready -> its phase boundaries (seconds since its first line; ready last)."""
    runs: list[list[Boundary]] = []
    engines: set[str] = set()
    for path in paths:
        with path.open("rb") as stream:
            timeline = replay_file(stream)
        total = timeline.total()
        if timeline.history_record() is None or total is None:
            print(f"skipped {path.name}: {timeline.outcome.value}, not a start to ready", file=sys.stderr)
            continue
        engines.add(timeline.engine)
        origin = timeline.origin
        run: list[Boundary] = [(span.phase, span.start - origin, None, None) for span in timeline.spans]
        runs.append([*run, (Phase.READY, total, None, None)])
    if len(engines) != 1 or len(runs) < 3:
        raise SystemExit(f"need at least 3 starts to ready of one engine, got {len(runs)} ({sorted(engines)})")
    return engines.pop(), runs


def evaluate(runs: list[list[Boundary]], order: tuple[Phase, ...], what: str) -> None:
    """Leave-one-out tables: this ETA, the ratio rule it replaced, and both with launching 2 s late."""
    report(leave_one_out(runs, order), f"leave-one-out, weighted by share (now): {what}")
    report(leave_one_out(runs, order, old=True), f"leave-one-out, ratio rule (before): {what}")
    report(leave_one_out(runs, order, late_launch=2.0), f"launching 2 s late, weighted by share (now): {what}")
    report(leave_one_out(runs, order, old=True, late_launch=2.0), f"launching 2 s late, ratio rule (before): {what}")


if __name__ == "__main__":
    asyncio.run(main())
