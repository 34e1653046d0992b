"""A speculation tune on the simulator through the embedded SSH host, killed and resumed; checked against the model.

Runs `specdash tune demo` (the real CLI in a subprocess; the demo's eagle3 mode, time scale 0.01) over
14 settings (`steps=1,2,3,5 topk=1,4 draft=4,8,16` after SGLang's rules) x 6 levels, with repeats;
in pass 2 the contended levels are measured in blocks to the precision target (`specdash.core.tune`).
Once the journal has a block record with index KILL_AT_BLOCK (mid-runoff: the hardest place to resume)
the CLI is SIGKILLed (process group) and run again with `--resume`. Then, from the simulator's model
(`specdash.sim.spec_space`, the ground truth):

* at every level, the chosen setting's true speedup vs the model's optimum over the same runnable grid
  (goal: within 2 %);
* restarts made vs the full grid's (goal: at least a third saved);
* level records in the journal and `done` levels in the store per (mode, C) (goal: nothing twice).

Usage: `python benchmarks/tune_sim.py [--append] [--duration S] [--repeats R] [--precision F] [--max-blocks N]`;
`--analyse DIR` only resumes and reports an earlier run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from specdash.bench.store import Store
from specdash.core import tune as core
from specdash.engines.spec_settings import SpecSetting, check_sglang
from specdash.sim.spec_space import DraftShape, aggregate

RESULTS = Path(__file__).with_name("RESULTS.md")
SPACE = "steps=1,2,3,5 topk=1,4 draft=4,8,16"
LEVELS = (1, 2, 4, 8, 16, 32)
KILL_AT_BLOCK = 3
"""The SIGKILL comes once a level record with this block index is in the journal (mid-runoff)."""


def true_tok_s(setting: SpecSetting | None, c: int) -> float:
    """The model's steady-state aggregate tok/s (no 48 cap needed: every level is below it)."""
    if setting is None:
        return aggregate(None, None, c)
    return aggregate("EAGLE3", DraftShape(setting.steps or 0, setting.topk or 0, setting.draft or 0), c)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--append", action="store_true")
    parser.add_argument("--duration", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--precision", type=float, default=core.PRECISION)
    parser.add_argument("--max-blocks", type=int, default=core.MAX_BLOCKS)
    parser.add_argument("--analyse", type=Path, metavar="DIR", help="only resume and report an earlier run's DIR")
    args = parser.parse_args()
    load_start = os.getloadavg()
    work = args.analyse or Path(tempfile.mkdtemp(prefix="tune-bench-"))
    env = {**os.environ, "XDG_DATA_HOME": str(work / "data"), "XDG_CONFIG_HOME": str(work / "cfg")}
    argv = [sys.executable, "-m", "specdash", "tune", "demo", "--mode", "eagle3", "--space", SPACE,
            "--levels", ",".join(map(str, LEVELS)), "--repeats", str(args.repeats), "--duration", str(args.duration),
            "--time-scale", "0.01", "--journal-dir", str(work / "j"), "--db", str(work / "db.sqlite"),
            "--name", "bench", "--json", "--no-verify", "--precision", str(args.precision),
            "--max-blocks", str(args.max_blocks)]  # fmt: skip
    journal = work / "j" / "bench.jsonl"
    t0 = time.monotonic()
    proc = subprocess.Popen(
        ["true"] if args.analyse else argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    killed_at = 0
    while proc.poll() is None and not args.analyse:
        if journal.exists():
            levels = [json.loads(ln) for ln in journal.read_text().splitlines() if '"type": "level"' in ln]
            if any(r.get("block", 0) >= KILL_AT_BLOCK for r in levels):
                os.killpg(proc.pid, signal.SIGKILL)
                killed_at = len(levels)
                break
        time.sleep(0.2)
    proc.wait()
    t_kill = time.monotonic() - t0
    done = subprocess.run([*argv, "--resume"], capture_output=True, text=True, env=env)
    wall = time.monotonic() - t0
    if done.returncode != 0:
        print(done.stderr[-3000:], file=sys.stderr)
        return 1
    out = json.loads(done.stdout)
    records = [json.loads(ln) for ln in journal.read_text().splitlines() if ln.strip()]
    keys = [(r["candidate"], r["repeat"], r["c"], r.get("block", 0)) for r in records if r.get("type") == "level"]
    load_end = os.getloadavg()
    with Store(work / "db.sqlite") as store:
        stored = Counter(
            (run.meta.mode, lv.concurrency)
            for run in store.runs()
            for lv in store.levels(run.id)
            if lv.status == "done"
        )
    _, points = core.parse_space(SPACE)
    keep, _ = core.runnable(points, check_sglang)
    by_label = {s.label: s for s in keep}
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"## Speculation tune on the simulator, killed and resumed ({stamp})",
        "",
        f"Machine: {platform.node()}, {os.cpu_count()} cores (shared with other work), Python "
        f"{platform.python_version()}. Command: `python benchmarks/tune_sim.py --duration {args.duration:g} "
        f"--repeats {args.repeats} --precision {args.precision:g} --max-blocks {args.max_blocks}` (`specdash tune demo "
        f"--mode eagle3 --space '{SPACE}' --levels {','.join(map(str, LEVELS))}`, time scale 0.01, "
        f"{args.duration:g} s per level and block, 128-token responses; SIGKILL at the first block-{KILL_AT_BLOCK + 1} "
        f"record ({killed_at} level records, {t_kill:.0f} s), then `--resume`). Wall time {wall / 60:.1f} min. "
        f"Load average (1/5/15 min) at the start {' '.join(f'{x:.1f}' for x in load_start)}, at the end "
        f"{' '.join(f'{x:.1f}' for x in load_end)}.",
        "",
        f"{len(out['settings'])} settings x {len(LEVELS)} levels (+ baseline); skipped by SGLang's rules: "
        f"{len(out['skipped'])} points. Restarts: {out['restarts']} of {out['full_grid_restarts']} for the full "
        f"grid ({out['restarts_saved']} saved, {out['restarts_saved'] / out['full_grid_restarts']:.0%}); "
        f"dropped: {', '.join(out['dropped']) or 'none'}.",
        "",
        "| C | chosen | blocks | chosen true tok/s | model optimum | optimum true tok/s | chosen / optimum | tie |",
        "|--:|---|--:|--:|---|--:|--:|---|",
    ]
    worst = 1.0
    for c in LEVELS:
        choice = out["policy"]["per_level"][str(c)]["choice"]
        chosen = None if choice == core.BASELINE else by_label[choice]
        best = max([None, *keep], key=lambda s: true_tok_s(s, c))
        ratio = true_tok_s(chosen, c) / true_tok_s(best, c)
        worst = min(worst, ratio)
        name = "no speculation" if best is None else best.label
        blocks = out["measured"].get(choice, {}).get(str(c), {}).get("n", 0)
        tie = ", ".join(out["policy"].get("ties", {}).get(str(c), [])) or "-"
        lines.append(
            f"| {c} | {choice} | {blocks} | {true_tok_s(chosen, c):.1f} | {name} | {true_tok_s(best, c):.1f} "
            f"| {ratio:.4f} | {tie} |"
        )
    dup_journal = len(keys) - len(set(keys))
    # Repeats measure a level again on purpose: the store must hold exactly the journal's repeats, no more.
    wanted = Counter(("baseline" if k[0] == core.BASELINE else f"eagle3@{k[0]}", k[2]) for k in set(keys))
    dup_store = sum(max(0, n - wanted[key]) for key, n in stored.items())
    lines += [
        "",
        f"Worst chosen/optimum: {worst:.4f} (goal >= 0.98). Policy: "
        + "; ".join(
            f"C {r['low']}-{r['high'] if r['high'] is not None else '∞'}: "
            f"{'no speculation' if r['choice'] == core.BASELINE else r['choice']} "
            f"({r['speedup']:.3f}x ± {r['spread']:.3f})"
            for r in out["policy"]["ranges"]
        )
        + f"; speculation stops paying above C = {out['policy']['disable_above']}.",
        f"Measured twice after the resume: {dup_journal} journal level records, {dup_store} stored levels "
        f"({len(keys)} level records, {sum(stored.values())} done levels in the store).",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.append:
        with RESULTS.open("a", encoding="utf-8") as f:
            f.write("\n" + text)
    return 0 if worst >= 0.98 and dup_journal == 0 and dup_store == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
