"""`specdash tune HOST --mode M --space '...'`: find the speculation policy per load, export it, verify it.

`HOST` may be `demo`: the built-in simulator behind an embedded SSH server, as `specdash demo` uses (no
sshd, no GPU), with the demo's modes (`baseline`, `eagle3`, `eagle3-dynamic`, `spec-v2`).

The search, the drop rule and the policy are `specdash.core.tune`; the restarts and the journal are
`specdash.server.tune`; the engine's own words are `specdash.core.spec_export`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specdash.bench.probe import ProbeSettings, install_uvloop
from specdash.bench.prompts import load_prompts
from specdash.bench.sse import Endpoint
from specdash.bench.sse import default_endpoint as for_engines
from specdash.bench.store import Store
from specdash.cli._host import connected, host_config, load_config
from specdash.cli.demo_session import TOUR_TIME_SCALE, demo_config, demo_session
from specdash.config import load
from specdash.core import tune as core
from specdash.core.events import BenchUpdate
from specdash.core.levels import parse_levels
from specdash.core.spec_export import exports, mode_toml
from specdash.core.tune import DEFAULT_LEVELS, DEFAULT_REPEATS, eta_text
from specdash.engines.registry import names
from specdash.errors import SpecdashError, UsageError
from specdash.limits import MAX_REPEATS
from specdash.paths import config_file
from specdash.server.launch import paste_command
from specdash.server.remote_session import running
from specdash.server.tune import Journal, TuneEvent, TuneResult, TuneRunner, build_plan, open_journal
from specdash.server.tune_report import policy_rows, report, speedup_chart

if TYPE_CHECKING:
    from specdash.config import Config, HostConfig, ModeConfig
    from specdash.core.tune import Policy
    from specdash.server.remote_session import RemoteSession
    from specdash.server.tune import TunePlan

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
    """The tune's plan from the flags and the config (`specdash.server.tune.build_plan`)."""

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
                return await _tune(args, session, session.config, session.host_config, levels, demo=True)

    cfg = load_config(args)
    levels = _check_tune(args, cfg)
    hc = host_config(args, cfg)
    async with contextlib.AsyncExitStack() as stack:
        session = await stack.enter_async_context(connected(args, cfg, hc))
        return await _tune(args, session, cfg, hc, levels, demo=False)
    return 1  # unreachable: the stack does not swallow exceptions


async def _tune(
    args: argparse.Namespace,
    session: RemoteSession,
    cfg: Config,
    hc: HostConfig,
    levels: tuple[int, ...],
    *,
    demo: bool,
) -> int:

    plan = make_plan(args, cfg, levels)
    live = sys.stderr if args.json else sys.stdout
    prompts = load_prompts(args.prompts)
    sweep = replace(
        session.sweep_defaults,
        duration_s=args.duration
        if args.duration is not None
        else (None if args.requests_per_level else (2.0 if demo else 30.0)),
        requests_per_level=args.requests_per_level,
        settings=ProbeSettings(
            endpoint=Endpoint(args.endpoint) if args.endpoint else default_endpoint(plan.engine),
            output_len=args.output_len or (128 if demo else 256),
        ),
        progress_interval_s=1.0,
        on_link_loss="pause",
    )
    path = (args.journal_dir or Journal.default_dir()) / f"{plan.name}.jsonl"
    journal, state = open_journal(plan, path, resume=args.resume or args.verify is not None)

    def on_event(event: TuneEvent) -> None:
        eta = f" (ETA {eta_text(event.eta_s)})" if event.eta_s is not None else ""
        print(f"tune: {event.text}{eta}", file=live, flush=True)

    for s in plan.skipped:
        print(f"tune: skip {s.setting.label}: {s.reason}", file=live, flush=True)
    records = session.store.startups(host=session.label, mode=plan.base_mode, limit=10) if session.store else []
    history = tuple(r.total_s for r in records if r.outcome == "ready" and r.total_s is not None)
    runner = TuneRunner(session, plan, journal, state, sweep, prompts, on_event, history_startup_s=history)
    try:
        if args.verify is None:
            result = await runner.run()
        else:
            pts = core.points(state.measured(), plan.noise_floor)
            if core.BASELINE not in pts:
                raise UsageError(f"--verify: the journal {path} has no measured tune to verify against")
            dropped = tuple(s.label for s in plan.order if core.dominated(s.label, pts))
            result = TuneResult(plan, state, pts, core.build_policy(pts, dropped), dropped, state.restarts)

        out = report(plan, result)
        base = session.config.mode(plan.base_mode)
        exported = _exports(plan, result.policy, base, simulated=_simulated(base), version=args.engine_version)

        out["exports"] = [{**e.to_json(), "command": paste_command(base, hc, e.args)} for e in exported]
        verify_mode = args.verify
        if verify_mode is None and exported and not args.no_verify and result.aborted is None:
            chosen = next(
                (e for e in exported if e.kind == "dynamic" and e.engine in ("sim", base.engine)), exported[0]
            )
            verify_mode = f"{plan.base_mode}-tuned"
            mode = replace(base, name=verify_mode, args=chosen.args, description=f"tuned {chosen.kind}")
            session.config = replace(session.config, modes={**session.config.modes, verify_mode: mode})
        if args.write_mode and exported:
            chosen = next(
                (e for e in exported if e.kind == "dynamic" and e.engine in ("sim", base.engine)), exported[0]
            )
            out["write_mode"] = _write_mode(args, cfg, args.write_mode, base, chosen, demo)
        if verify_mode is not None:
            out["verify"] = await _verify(args, session, runner, result, verify_mode, live)
    finally:
        journal.close()
    if args.json:
        print(json.dumps(out, default=str))
    else:
        _print(out, live)
    unsafe = bool(out.get("verify", {}).get("unsafe"))
    if not out.get("measured") and result.aborted is None:
        # Every level failed (e.g. an endpoint the server does not have): no policy, and not a success.
        print("specdash: error: the tune measured no level (see the failed levels above)", file=sys.stderr)
        return 1
    return 1 if result.aborted or unsafe else 0


def _simulated(mode: ModeConfig) -> bool:
    return len(mode.launcher) >= 2 and mode.launcher[-1] == "sim"


def _exports(
    plan: TunePlan, policy: Policy, base: ModeConfig, *, simulated: bool, version: str | None = None
) -> list[Any]:

    settings = {s.label: s for s in plan.order}
    return exports(base, policy, settings, simulated, version)


async def _verify(
    args: argparse.Namespace, session: RemoteSession, runner: Any, result: TuneResult, mode: str, live: Any
) -> dict[str, Any]:

    session.config.mode(mode)
    policy = result.policy
    ramp = core.verify_ramp(result.plan.levels, policy.disable_above)
    hold = (policy.disable_above + 1) if policy.disable_above else ramp[-1]
    print(f"tune: verify {mode}: ramp {','.join(map(str, ramp))}, hold at C={hold}", file=live, flush=True)
    measured: dict[int, float] = {}
    crash: dict[str, Any] | None = None

    def grab(event: object) -> None:

        if isinstance(event, BenchUpdate):
            for row in event.rows:
                if row.mode == mode and row.status == "done" and row.tok_s is not None:
                    measured.setdefault(row.concurrency, row.tok_s)

    session.subscribe(grab)
    held: float | None = None
    try:
        await session.sweep([mode], ramp, config=runner.sweep_config, prompts=runner.prompts)
        base_cfg = runner.sweep_config
        long = replace(base_cfg, duration_s=(base_cfg.duration_s or 30.0) * args.hold, requests_per_level=None)
        before = dict(measured)
        measured.pop(hold, None)
        await session.sweep([mode], [hold], config=long, prompts=runner.prompts)
        held = measured.get(hold)
        measured.update({c: v for c, v in before.items() if c != hold})
        if held is not None:
            measured[hold] = min(held, before.get(hold, held))
    except SpecdashError as exc:
        status = session.status
        level = next((c for c in (*ramp, hold) if c not in measured), None)
        crash = {"line": status.crash.reason if status.crash else exc.message, "level": level, "error": exc.message}
    finally:
        session.unsubscribe(grab)
    fixed = result.points.get(policy.fixed) if policy.fixed else None
    checks = core.verify_levels(
        measured, (*ramp,), fixed, result.points.get(core.BASELINE, {}), result.plan.noise_floor
    )
    worse = [v.concurrency for v in checks if v.ok is False]
    record = {
        "type": "verify",
        "mode": mode,
        "ramp": list(ramp),
        "hold": hold,
        "levels": [v.to_json() for v in checks],
        "crash": crash,
        "worse_at": worse,
        "unsafe": crash is not None,
        "ok": crash is None and not worse,
    }
    runner.journal.write(record)
    return record


def _write_mode(
    args: argparse.Namespace, cfg: Config, name: str, base: ModeConfig, export: Any, demo: bool
) -> dict[str, Any]:

    if name in cfg.modes:
        raise UsageError(f"--write-mode {name}: a mode of that name exists already")
    text = mode_toml(name, base, export)
    path = args.config if args.config is not None else (None if demo else cfg.path)
    if path is None:
        path = None if demo else config_file()
    if path is None:
        return {"mode": name, "written": None, "toml": text}
    path = Path(path)
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    new = old + ("\n" if old and not old.endswith("\n\n") else "") + text
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(new, encoding="utf-8")
    try:
        load(tmp, engines=names())  # the file must still be a valid config before it replaces the old one
    except UsageError:
        tmp.unlink()
        raise
    tmp.replace(path)
    return {"mode": name, "written": str(path), "toml": text}


def _print(out: dict[str, Any], live: Any) -> None:

    policy = out["policy"]
    print(file=live)
    print(f"tune {out['name']}: {len(out['settings'])} settings x {len(out['levels'])} levels; "
          f"{out['restarts']} restarts of {out['full_grid_restarts']} for the full grid "
          f"({out['restarts_saved']} saved by the drop rule)", file=live)  # fmt: skip
    print(f"rule: {out['rule']}", file=live)
    if out["dropped"]:
        print(f"dropped: {', '.join(out['dropped'])}", file=live)
    for crash in out["crashes"]:
        print(f"crashed: {crash['candidate']} at C={crash.get('c')}: {crash.get('reason')}", file=live)
    print(file=live)
    print(f"{'C range':>10}  {'setting':<14} {'speedup':>8}  {'± spread':>8}", file=live)
    for span, choice, speedup, spread in policy_rows(out):
        print(f"{span:>10}  {choice:<14} {speedup:>8}  {spread:>8}", file=live)
    threshold = policy["disable_above"]
    print(f"speculation stops paying above C = {threshold}" if threshold else "speculation never pays", file=live)
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
