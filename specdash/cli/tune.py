"""`specdash tune HOST --mode M --space '...'`: find the speculation policy per load, export it, verify it.

`HOST` may be `demo`: the built-in simulator behind an embedded SSH server, as `specdash demo` uses (no
sshd, no GPU), with the demo's modes (`baseline`, `eagle3`, `eagle3-dynamic`, `spec-v2`).

The search, the drop rule and the policy are `specdash.core.tune`; the plan, the journal, the restarts and the
end (export, verify, `--write-mode`) are `specdash.tune` (`TuneJob`, which the dashboard's T view runs too); the
engine's own words are `specdash.core.spec_export`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specdash.bench.probe import install_uvloop
from specdash.bench.sse import Endpoint
from specdash.bench.sse import default_endpoint as for_engines
from specdash.bench.store import Store
from specdash.cli._host import connected, host_config, load_config
from specdash.cli.demo_session import TOUR_TIME_SCALE, demo_config, demo_session
from specdash.core.levels import parse_levels
from specdash.core.tune import DEFAULT_LEVELS, DEFAULT_REPEATS, eta_text
from specdash.errors import UsageError
from specdash.limits import MAX_REPEATS
from specdash.paths import config_file
from specdash.server.remote_session import running
from specdash.tune.job import TuneJob, TuneOptions
from specdash.tune.plan import build_plan
from specdash.tune.report import policy_line, policy_rows, speedup_chart
from specdash.tune.runner import TuneEvent

if TYPE_CHECKING:
    from specdash.bench.sse import Endpoint
    from specdash.config import Config
    from specdash.server.remote_session import RemoteSession
    from specdash.tune.plan import TunePlan

DEMO_HOST = "demo"


def apply_tune_table(args: argparse.Namespace, cfg: Config) -> None:
    """Fill unset flags from `[tune.NAME]` (flags given on the command line win), then the defaults."""
    if args.tune is not None:
        table = cfg.tunes.get(args.tune)
        if table is None:
            known = ", ".join(sorted(cfg.tunes)) or "none"
            raise UsageError(f"--tune {args.tune}: no [tune.{args.tune}] in the config (known: {known})")
        args.mode = args.mode or table.mode
        args.baseline = args.baseline or table.baseline
        args.space = args.space or table.space
        args.levels = args.levels or table.levels or None
        args.repeats = args.repeats if args.repeats is not None else (table.repeats or None)
        args.name = args.name or table.name
    if not args.mode:
        raise UsageError("--mode is required (or --tune NAME with a [tune.NAME] table)")
    args.baseline = args.baseline or "baseline"
    args.levels = args.levels or DEFAULT_LEVELS
    args.repeats = args.repeats if args.repeats is not None else DEFAULT_REPEATS


def default_endpoint(engine: str) -> Endpoint:
    """The probe's endpoint for an engine (`specdash.bench.sse.default_endpoint`)."""

    return for_engines(engine)


def _check_args(args: argparse.Namespace) -> None:
    # Values and ranges are the parser's (`specdash.cli.options`, the same for bench); what is left is tune's.
    if args.time_scale is not None and args.host != DEMO_HOST:
        raise UsageError("--time-scale is for HOST demo only")


def _check_tune(args: argparse.Namespace, cfg: Config) -> tuple[int, ...]:

    apply_tune_table(args, cfg)
    try:
        levels = parse_levels(args.levels)
    except UsageError as exc:
        raise UsageError(f"--levels: {exc.message}") from exc
    if not 1 <= args.repeats <= MAX_REPEATS:
        raise UsageError(f"--repeats must be between 1 and {MAX_REPEATS}, got {args.repeats}")
    if args.verify is None and not args.space:
        raise UsageError("--space is required (e.g. 'steps=1,2,3 topk=1,4 draft=4,8'), unless --verify MODE")
    return levels


def make_plan(args: argparse.Namespace, cfg: Config, levels: tuple[int, ...]) -> TunePlan:
    """The tune's plan from the flags and the config (`specdash.tune.plan.build_plan`)."""

    return build_plan(
        cfg,
        host=args.host,
        mode=args.mode,
        baseline=args.baseline,
        space=args.space or "",
        levels=levels,
        repeats=args.repeats,
        name=args.name,
        noise_floor=args.noise_floor,
        precision=args.precision,
        max_blocks=args.max_blocks,
    )


def run(args: argparse.Namespace) -> int:
    """Run the tune (or only the verification) and print the policy."""

    _check_args(args)
    if args.host != DEMO_HOST:  # the demo's embedded SSH server launches processes: the default loop
        install_uvloop()
    return asyncio.run(_main(args))


async def _main(args: argparse.Namespace) -> int:

    if args.host == DEMO_HOST:
        levels = _check_tune(args, demo_config(0))  # fails before the demo host starts
        async with demo_session(args.time_scale or TOUR_TIME_SCALE) as demo:
            if args.db is not None:
                demo.session.store = Store(args.db)
            async with running(demo.session) as session:
                return await _tune(args, session, session.config, levels, demo=True)

    cfg = load_config(args)
    levels = _check_tune(args, cfg)
    hc = host_config(args, cfg)
    async with contextlib.AsyncExitStack() as stack:
        session = await stack.enter_async_context(connected(args, cfg, hc))
        return await _tune(args, session, cfg, levels, demo=False)
    return 1  # unreachable: the stack does not swallow exceptions


async def _tune(
    args: argparse.Namespace,
    session: RemoteSession,
    cfg: Config,
    levels: tuple[int, ...],
    *,
    demo: bool,
) -> int:

    plan = make_plan(args, cfg, levels)
    live = sys.stderr if args.json else sys.stdout
    options = TuneOptions(
        duration_s=args.duration if args.duration is not None else (2.0 if demo else 30.0),
        requests_per_level=args.requests_per_level,
        output_len=args.output_len or (128 if demo else 256),
        endpoint=Endpoint(args.endpoint) if args.endpoint else None,
        prompts=args.prompts,
        journal_dir=args.journal_dir,
        resume=args.resume,
        verify=not args.no_verify,
        verify_only=args.verify,
        write_mode=args.write_mode,
        config_path=_config_path(args, cfg, demo),
        engine_version=args.engine_version,
        hold=args.hold,
    )

    def on_event(event: TuneEvent) -> None:
        eta = f" (ETA {eta_text(event.eta_s)})" if event.eta_s is not None else ""
        print(f"tune: {event.text}{eta}", file=live, flush=True)

    job = TuneJob(session, plan, options, on_event)
    for s in plan.skipped:
        print(f"tune: skip {s.setting.label}: {s.reason}", file=live, flush=True)
    outcome = await job.run()
    out, result = outcome.out, outcome.result
    if args.json:
        print(json.dumps(out, default=str))
    else:
        _print(out, live)
    if not out.get("measured") and result.aborted is None:
        # Every level failed (e.g. an endpoint the server does not have): no policy, and not a success.
        print("specdash: error: the tune measured no level (see the failed levels above)", file=sys.stderr)
        return 1
    return 1 if result.aborted or outcome.unsafe else 0


def _config_path(args: argparse.Namespace, cfg: Config, demo: bool) -> Path | None:
    """The config file `--write-mode` writes: `--config`, the loaded one, else the default path (the demo's
    config is in memory: none, the TOML is printed)."""
    if args.config is not None:
        return Path(args.config)
    if demo:
        return None
    if cfg.path is not None:
        return Path(cfg.path)

    return config_file()


def _print(out: dict[str, Any], live: Any) -> None:

    policy = out["policy"]
    print(file=live)
    print(f"tune {out['name']}: {len(out['settings'])} settings x {len(out['levels'])} levels; "
          f"{out['restarts']} restarts of {out['full_grid_restarts']} for the full grid "
          f"({out['restarts_saved']} saved by the drop rule)", file=live)  # fmt: skip
    print(f"rule: {out['rule']}", file=live)
    if out["dropped"]:
        print(f"dropped: {', '.join(out['dropped'])}", file=live)
    for job in out.get("jobs", []):
        which = f"job {job['job_id']} ({job['candidate']} #{int(job['repeat']) + 1})"
        print(f"{which}: queued {job['queue_wait_s']:.1f} s, then ready in {job['seconds']:.1f} s", file=live)
    for crash in out["crashes"]:
        print(f"crashed: {crash['candidate']} at C={crash.get('c')}: {crash.get('reason')}", file=live)
    print(file=live)
    print(f"{'C range':>10}  {'setting':<14} {'speedup':>8}  {'± spread':>8}", file=live)
    for span, choice, speedup, spread in policy_rows(out):
        print(f"{span:>10}  {choice:<14} {speedup:>8}  {spread:>8}", file=live)
    print(policy_line(out), file=live)
    print(f"best fixed setting: {policy['fixed'] or 'none (no speculation)'}", file=live)
    for c, members in policy.get("ties", {}).items():
        print(f"tie at C={c}: {', '.join(members)} (not separated; chosen: the highest median, {members[0]})",
              file=live)  # fmt: skip
    print(file=live)
    print(speedup_chart(out), file=live)
    for e in out.get("exports", []):
        print(f"\n{e['kind']} ({e['engine']}; {e['needs']}):\n  {e['command']}", file=live)
        if e.get("note"):
            print(f"  {e['note']}", file=live)
    if "write_mode" in out:
        w = out["write_mode"]
        where = f"written to {w['written']}" if w["written"] else "(no config file: add this table to yours)"
        print(f"\nmode {w['mode']} {where}:\n{w['toml']}", file=live)
    if "verify" in out:
        v = out["verify"]
        print(f"\nverify {v['mode']}:", file=live)
        for lv in v["levels"]:
            mark = {True: "ok", False: "WORSE", None: "-"}[lv["ok"]]
            tok = f"{lv['tok_s']:.1f}" if lv["tok_s"] is not None else "-"
            ref = f"{lv['reference']:.1f}" if lv["reference"] is not None else "-"
            print(f"  C={lv['c']:<4} {tok:>8} tok/s vs {ref:>8} (± {lv['spread']:.1f})  {mark}", file=live)
        if v["crash"]:
            print(f"  CRASH at C={v['crash']['level']}: {v['crash']['line']}", file=live)
            print("  policy UNSAFE", file=live)
        else:
            print("  policy verified" if v["ok"] else f"  worse at C = {v['worse_at']}", file=live)
