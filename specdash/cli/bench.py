"""`specdash bench HOST --mode M[,M2]` or `specdash bench --url URL --mode NAME`: a headless sweep.

With HOST, the sweep goes over SSH: each mode in turn is started (or switched to, restarting the server
through the lifecycle layer) and measured through a port forward; with two or more modes it ends with
the crossover. With `--url` it measures a server that is already reachable. Either way it shows each level's
progress (one updating line per level on a terminal, a plain line per second in a pipe) and a final table
that fits the terminal (`$COLUMNS`; every column in a pipe), and every request is written to the local store
as it finishes.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

from specdash.bench.greedy import greedy_outputs
from specdash.bench.listener import server_command
from specdash.bench.probe import ProbeSettings, install_uvloop
from specdash.bench.prompts import load_prompts
from specdash.bench.sse import Endpoint
from specdash.bench.store import RunMeta, Store
from specdash.bench.sweep import LevelResult, SweepConfig, run_sweep
from specdash.bench.sweep_data import url_origin, validate_url
from specdash.bench.text_tables import level_table, progress_line, repeats_table, sweep_verdict
from specdash.cli._host import connected, host_config, load_config
from specdash.cli._live import StatusPrinter
from specdash.cli._slo import slo_from
from specdash.cli._terminal import LiveLine, table_width
from specdash.core.compare import compute_crossover, pool_runs
from specdash.core.events import BenchTick, BenchUpdate
from specdash.core.greedy import compare_outputs
from specdash.core.levels import parse_levels
from specdash.errors import SpecdashError, UsageError
from specdash.phases import Phase

if TYPE_CHECKING:
    from specdash.bench.probe import ProbeSettings
    from specdash.bench.sweep_data import SweepResult
    from specdash.core.greedy import GreedyCheck
    from specdash.server.remote_session import RemoteSession


MAX_REPEATS = 20
"""Upper bound on `--repeats` (every load loop is bounded)."""
MAX_REQUESTS = 1_000_000
"""Upper bound on `--requests-per-level` and `--warmup`."""
MAX_PROCESSES = 64
"""Upper bound on `--processes`."""
MAX_GREEDY = 1000
"""Upper bound on `--check-greedy`."""


def probe_line(probe: dict[str, str] | None) -> str:
    """`probe on the host (Python 3.11.2)` or `probe here: <why>`."""
    if probe and probe.get("where") == "host":
        return f"probe on the host (Python {probe.get('python', '?')})"
    return f"probe here: {(probe or {}).get('why', 'local')}"


def run(args: argparse.Namespace) -> int:
    """Run the sweep and print the results."""

    if bool(args.url) == bool(args.host):
        raise UsageError("give either HOST (measure over SSH) or --url (a server you can reach), not both or neither")
    if args.url and args.probe:
        raise UsageError("--probe needs HOST: with --url the probe runs here")
    url = validate_url(args.url) if args.url else ""
    if url:
        # The SSH-only options would be silently ignored with --url: refuse them instead.
        for flag, value in (("-J/--jump", getattr(args, "jump", None)), ("--on-link-loss", args.on_link_loss),
                            ("--link-wait", args.link_wait)):  # fmt: skip
            if value is not None:
                raise UsageError(f"{flag} applies to HOST only (over SSH), not to --url")
    try:
        levels = parse_levels(args.levels)
    except UsageError as exc:
        raise UsageError(f"--levels: {exc.message}") from exc

    slo = slo_from(args.slo)
    if args.check_greedy is not None and not 1 <= args.check_greedy <= MAX_GREEDY:
        raise UsageError(f"--check-greedy must be between 1 and {MAX_GREEDY}, got {args.check_greedy}")
    if args.greedy_reference is not None and not (args.url and args.check_greedy):
        raise UsageError("--greedy-reference goes with --url and --check-greedy")
    if args.check_greedy and args.url and not args.greedy_reference:
        raise UsageError("--check-greedy with --url needs --greedy-reference URL (the reference mode's server)")
    if args.check_greedy and args.host and len([m for m in args.mode.split(",") if m.strip()]) < 2:
        raise UsageError("--check-greedy over SSH needs two modes (--mode REFERENCE,SPECULATIVE)")
    greedy_ref = validate_url(args.greedy_reference) if args.greedy_reference else ""

    prompts = load_prompts(args.prompts)
    config = SweepConfig(
        mode=args.mode,
        levels=levels,
        max_concurrency=args.max_concurrency,
        requests_per_level=args.requests_per_level,
        duration_s=args.duration,
        warmup_requests=args.warmup,
        level_timeout_s=args.level_timeout,
        flush_cache=args.flush_cache,
        processes=args.processes,
        slo=slo,
        endpoint_follows_engine=args.endpoint is None,
        settings=ProbeSettings(
            endpoint=Endpoint(args.endpoint or Endpoint.GENERATE),
            output_len=args.output_len,
            model=args.model,
            request_timeout_s=args.request_timeout,
            stall_timeout_s=args.stall_timeout,
        ),
    )
    config.effective_levels()
    # One updating line per level on a terminal, plain lines in a pipe; with --json, on stderr.
    live = LiveLine(sys.stderr if args.json else sys.stdout)

    def on_progress(p: BenchTick) -> None:
        live.update(progress_line(p))

    def on_level_done(r: LevelResult) -> None:
        s = r.stats
        live.line(f"[{r.mode} C={r.concurrency}] {r.status}: {s.output_tok_s:.1f} tok/s steady, "
                  f"{s.completed} ok, {s.failed} failed")  # fmt: skip

    def on_warning(text: str) -> None:
        live.line(f"warning: {text}")

    install_uvloop()
    if args.host:
        return asyncio.run(_over_ssh(args, config, prompts, on_progress, on_level_done))
    with Store(args.db) as store:
        # Not launched by specdash: the command line of the process behind a loopback URL, or why it is unknown.
        meta = RunMeta(host=url_origin(url), mode=args.mode, provenance=server_command(url).provenance())
        results = []
        for _ in range(args.repeats):
            results.append(
                asyncio.run(
                    run_sweep(
                        url,
                        config,
                        prompts,
                        store,
                        on_progress=on_progress,
                        on_level_done=on_level_done,
                        run_meta=meta,
                        on_warning=on_warning,
                    )
                )
            )
            if results[-1].aborted:
                break
    greedy = None
    if args.check_greedy:
        greedy = asyncio.run(_greedy_check(args, {"reference": greedy_ref, args.mode: url}, prompts.prompts))
    if args.repeats > 1:
        _print_repeats(args, {args.mode: results})
        return _exit_status([(args.mode, r) for r in results]) or _failed_levels(results)
    result = results[0]
    levels_json = [lv.to_json() for lv in result.levels]
    if args.json:
        out: dict[str, object] = {"run_id": result.run_id, "aborted": result.aborted, "probe": result.probe,
               "levels": levels_json, "verdict": sweep_verdict({args.mode: result}, slo)}  # fmt: skip
        if greedy is not None:
            out["greedy"] = dataclasses.asdict(greedy)
        print(json.dumps(out, default=str))
    else:
        print()
        endpoint = args.endpoint or "the engine's endpoint"
        print(f"run {result.run_id} ({args.mode}, {prompts.name} prompts, {endpoint}, {args.output_len} tokens)")
        print(level_table(levels_json, width=table_width()))
        print(sweep_verdict({args.mode: result}, slo))
    if greedy is not None and not args.json:
        print(greedy.text)
    return _exit_status([(args.mode, result)]) or _failed_levels(results)


def _exit_status(results: list[tuple[str, SweepResult]]) -> int:
    """1 (and one line on stderr per sweep that stopped early, naming its mode and why) when any did; else 0."""
    stopped = [(mode, r.aborted) for mode, r in results if r.aborted is not None]
    for mode, why in stopped:
        print(f"specdash: error: the sweep of {mode} stopped: {why}", file=sys.stderr)
    return 1 if stopped else 0


def _failed_levels(results: list[SweepResult]) -> int:
    """1 (and one line on stderr naming them) when any level failed, e.g. every request of it; else 0."""
    failed = [lv for r in results for lv in r.levels if lv.status == "failed"]
    if not failed:
        return 0
    names = "; ".join(f"{lv.mode} C={lv.concurrency}: {lv.abort_reason or 'failed'}" for lv in failed[:5])
    print(f"specdash: error: {len(failed)} level(s) failed: {names}", file=sys.stderr)
    return 1


async def _over_ssh(args: argparse.Namespace, config, prompts, on_progress, on_level_done) -> int:  # type: ignore[no-untyped-def]
    """The HOST form: start or switch each mode through the lifecycle, sweep it, compare."""

    cfg = load_config(args)
    modes = [m.strip() for m in args.mode.split(",") if m.strip()]
    for mode in modes:
        cfg.mode(mode)
    printer = StatusPrinter(sys.stderr if args.json else sys.stdout, host=args.host)
    done: set[tuple[str, int]] = set()

    def listen(event: object) -> None:
        if isinstance(event, BenchTick):
            printer.live.update(progress_line(event))
            return
        if isinstance(event, BenchUpdate):
            for row in event.rows:
                if row.status == "paused":
                    printer.live.line(f"[{row.mode} C={row.concurrency}] paused: {row.warning}")
                if row.status in ("done", "failed") and (row.mode, row.concurrency) not in done:
                    done.add((row.mode, row.concurrency))
                    printer.live.line(
                        f"[{row.mode} C={row.concurrency}] {row.status}: {row.tok_s or 0:.1f} tok/s steady"
                    )
            return
        printer(event)  # type: ignore[arg-type]

    config = replace(
        config,
        slo=config.slo or slo_from(cfg.bench.slo, f"{cfg.path or 'config'}: [bench] slo"),
        progress_interval_s=1.0,
        on_link_loss=args.on_link_loss or cfg.bench.on_link_loss,
        link_wait_s=args.link_wait or cfg.bench.link_wait,
        probe=args.probe or cfg.bench.probe,
    )
    repeats: dict[str, list[SweepResult]] = {mode: [] for mode in modes}
    async with connected(args, cfg, host_config(args, cfg), listen) as session:
        for repeat in range(args.repeats):
            # A-B, B-A, A-B...: drift over a long run (thermal, other tenants) does not favour one mode.
            order = modes if repeat % 2 == 0 else modes[::-1]
            await session.sweep(order, config.levels, config=config, prompts=prompts, reference=modes[0])
            for mode in order:
                if mode in session.results:
                    repeats[mode].append(session.results[mode])
            if any(res.aborted for res in session.results.values()):
                break
        results = dict(session.results)
        greedy = (
            await _greedy_over_ssh(args, session, modes, prompts.prompts, config.settings)
            if args.check_greedy
            else None
        )
    if args.repeats > 1:
        _print_repeats(args, repeats)
        runs = [(mode, r) for mode, rs in repeats.items() for r in rs]
        return _exit_status(runs) or _failed_levels([r for _, r in runs])
    curves = {mode: r.curve() for mode, r in results.items()}
    crossover = compute_crossover(curves[modes[0]], curves[modes[1]]) if len(modes) >= 2 else None
    if args.json:
        out: dict[str, object] = {
            m: {"run_id": r.run_id, "aborted": r.aborted, "probe": r.probe, "levels": [lv.to_json() for lv in r.levels]}
            for m, r in results.items()
        }
        if crossover is not None:
            out["crossover"] = {"kind": crossover.kind.value, "concurrency": crossover.concurrency,
                                "disable_above": crossover.disable_above}  # fmt: skip
        out["verdict"] = sweep_verdict({m: results[m] for m in modes if m in results}, config.slo)
        if greedy is not None:
            out["greedy"] = dataclasses.asdict(greedy)
        print(json.dumps(out, default=str))
    else:
        reference = curves[modes[0]] if len(results) >= 2 and modes[0] in curves else None
        for mode, r in results.items():
            print(f"\nrun {r.run_id} ({mode} on {args.host}; {probe_line(r.probe)})")
            rows = [lv.to_json() for lv in r.levels]
            print(level_table(rows, None if mode == modes[0] else reference, width=table_width()))
        print()
        print(sweep_verdict({m: results[m] for m in modes if m in results}, config.slo))
        if greedy is not None:
            print(greedy.text)
    return _exit_status(list(results.items())) or _failed_levels(list(results.values()))


def _print_repeats(args: argparse.Namespace, repeats: dict[str, list[SweepResult]]) -> None:
    """The pooled report of `--repeats N`: median ± MAD per level per mode, the crossover on the medians."""

    modes = list(repeats)
    pooled = [pool_runs([r.curve() for r in repeats[m]]) for m in modes]
    if args.json:
        out: dict[str, object] = {
            m: {
                "runs": [{"run_id": r.run_id, "aborted": r.aborted, "levels": [lv.to_json() for lv in r.levels]}
                         for r in repeats[m]],
                "pooled": {str(c): dataclasses.asdict(s) for c, s in spreads.items()},
            }
            for m, spreads in zip(modes, pooled, strict=True)
        }  # fmt: skip
        if len(modes) >= 2:
            medians = [{c: s.median for c, s in spreads.items()} for spreads in pooled]
            x = compute_crossover(medians[0], medians[1])
            out["crossover"] = {"kind": x.kind.value, "concurrency": x.concurrency, "disable_above": x.disable_above}
        print(json.dumps(out, default=str))
    else:
        for m in modes:
            print(f"\n{m}: runs {', '.join(str(r.run_id) for r in repeats[m])}")
        print()
        print(repeats_table(modes, pooled))


async def _greedy_texts(args: argparse.Namespace, url: str, prompts: tuple[str, ...]) -> list[str]:
    """The first `--check-greedy` prompts' outputs at temperature 0 from the server at `url`."""

    chosen = [prompts[i % len(prompts)] for i in range(args.check_greedy)]
    return await greedy_outputs(
        # Without --endpoint: /v1/completions, which SGLang and vLLM both serve (the two URLs' engines are
        # not identified here, and both modes must be asked the same way).
        url,
        chosen,
        endpoint=Endpoint(args.endpoint or Endpoint.COMPLETIONS),
        output_len=args.output_len,
        model=args.model,
    )


async def _greedy_check(args: argparse.Namespace, urls: dict[str, str], prompts: tuple[str, ...]) -> GreedyCheck:
    """`--check-greedy N` against two reachable servers: `urls` is {reference name: URL, other name: URL}."""

    (ref, ref_url), (other, other_url) = list(urls.items())
    ref_texts = await _greedy_texts(args, ref_url, prompts)
    return compare_outputs(ref, other, ref_texts, await _greedy_texts(args, other_url, prompts))


async def _greedy_over_ssh(
    args: argparse.Namespace,
    session: RemoteSession,
    modes: list[str],
    prompts: tuple[str, ...],
    settings: ProbeSettings,
) -> GreedyCheck:
    """`--check-greedy N` over SSH: the last swept mode first (it is live, no restart), then the reference mode
    (started again through the lifecycle). Both modes' outputs go to the store (`RemoteSession.greedy_texts`)."""

    texts: dict[str, list[str]] = {}
    for mode in (modes[-1], modes[0]):
        if session.status.mode != mode or session.status.phase is not Phase.READY:
            await session.switch(mode)
            status = await session.wait_status([Phase.READY, Phase.CRASHED, Phase.EXITED], timeout=3600)
            if status.phase is not Phase.READY:
                raise SpecdashError(f"greedy check: {mode} did not become ready ({status.phase.value})")
        texts[mode] = await session.greedy_texts(args.check_greedy, prompts, settings)
    return compare_outputs(modes[0], modes[-1], texts[modes[0]], texts[modes[-1]])
