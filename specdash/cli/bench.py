"""`specdash bench HOST --mode M[,M2]` or `specdash bench --url URL --mode NAME`: a headless sweep.

With HOST, the sweep goes over SSH: each mode in turn is started (or switched to, restarting the server
through the lifecycle layer) and measured through a port forward; with two or more modes it ends with
the crossover. With `--url` it measures a server that is already reachable. Either way it prints a live
line per second and a final table, and every request is written to the local store as it finishes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from specdash.core.levels import DEFAULT_LEVELS, LEVELS_GRAMMAR, MAX_LEVEL, format_levels, parse_levels
from specdash.errors import SpecdashError, UsageError

if TYPE_CHECKING:
    from specdash.bench.probe import ProbeSettings
    from specdash.bench.sweep_data import SweepResult
    from specdash.core.greedy import GreedyCheck
    from specdash.server.remote_session import RemoteSession

NAME = "bench"
HELP = "sweep concurrency levels against a server and measure tok/s, TTFT, TPOT, ITL"


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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the bench flags."""
    from specdash.cli._host import add_host_arguments
    from specdash.config import LINK_LOSS_POLICIES, PROBE_PLACES
    from specdash.limits import MAX_OUTPUT_LEN, SECONDS, int_option

    add_host_arguments(parser, optional=True)
    parser.add_argument("--url", help="instead of HOST: a server base URL, e.g. http://127.0.0.1:30000")
    parser.add_argument(
        "--mode",
        "--modes",
        dest="mode",
        default="default",
        help="mode(s) to measure; with HOST, a comma-separated list runs an A/B (e.g. baseline,eagle3)",
    )
    parser.add_argument(
        "--levels",
        default=format_levels(DEFAULT_LEVELS),
        help=f"concurrency levels: {LEVELS_GRAMMAR}; 1 to {MAX_LEVEL} (default %(default)s)",
    )
    parser.add_argument("--max-concurrency", type=int_option(1, MAX_LEVEL), help="drop levels above this")
    amount = parser.add_mutually_exclusive_group()
    amount.add_argument(
        "--requests-per-level", type=int_option(1, MAX_REQUESTS), help="requests per level (default max(5 x C, 10))"
    )
    amount.add_argument("--duration", type=SECONDS, help="seconds per level instead of a request count")
    parser.add_argument(
        "--output-len",
        type=int_option(1, MAX_OUTPUT_LEN),
        default=256,
        help="tokens per response (default %(default)s)",
    )
    parser.add_argument(
        "--endpoint",
        choices=["generate", "chat", "completions"],
        help="what the probe requests (default: the server's engine decides: SGLang's /generate, else /v1/completions)",
    )
    parser.add_argument("--prompts", default="chat", help="chat, code or a JSONL file (default %(default)s)")
    parser.add_argument("--model", help="model name for the OpenAI endpoints (default: from /v1/models)")
    parser.add_argument("--warmup", type=int_option(0, MAX_REQUESTS), help="warmup requests per level (default C)")
    parser.add_argument("--flush-cache", action="store_true", help="POST /flush_cache before each level")
    parser.add_argument(
        "--processes", type=int_option(0, MAX_PROCESSES), help="probe processes (default: automatic; 0 = in-process)"
    )
    parser.add_argument("--request-timeout", type=SECONDS, default=600.0, help="seconds per request")
    parser.add_argument("--stall-timeout", type=SECONDS, default=60.0, help="seconds without bytes = stalled")
    parser.add_argument("--level-timeout", type=SECONDS, help="hard limit per level in seconds")
    parser.add_argument(
        "--on-link-loss",
        choices=LINK_LOSS_POLICIES,
        help="HOST only: when the SSH link drops, pause and re-run the level, or stop (default: config, pause)",
    )
    parser.add_argument("--link-wait", type=SECONDS, help="HOST only: seconds a paused sweep waits (default 600)")
    parser.add_argument(
        "--probe",
        choices=PROBE_PLACES,
        help="HOST only: run the probe on the host next to the server, or here through the tunnel "
        "(default: config, host)",
    )
    parser.add_argument(
        "--repeats",
        type=int_option(1, MAX_REPEATS),
        default=1,
        help="run the whole sweep N times (A/B in A-B-B-A order) and report median ± MAD per level (default 1)",
    )
    from specdash.cli._slo import add_slo_argument

    add_slo_argument(parser)
    parser.add_argument(
        "--check-greedy",
        type=int,
        metavar="N",
        help="after the sweep, send N prompts at temperature 0 to the reference and the speculative mode and "
        "report how many outputs are identical (HOST with two modes, or --url with --greedy-reference)",
    )
    parser.add_argument(
        "--greedy-reference", metavar="URL", help="with --url and --check-greedy: the reference mode's server"
    )
    parser.add_argument("--db", type=Path, help="store file (default: the data dir's specdash.db)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON (live lines go to stderr)")


def run(args: argparse.Namespace) -> int:
    """Run the sweep and print the results."""
    from specdash.bench.listener import server_command
    from specdash.bench.sweep_data import url_origin, validate_url

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
    from specdash.cli._slo import slo_from

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

    import asyncio

    from specdash.bench.probe import ProbeSettings, install_uvloop
    from specdash.bench.prompts import load_prompts
    from specdash.bench.sse import Endpoint
    from specdash.bench.store import RunMeta, Store
    from specdash.bench.sweep import LevelResult, SweepConfig, run_sweep
    from specdash.bench.text_tables import level_table, progress_line, sweep_verdict
    from specdash.core.events import BenchTick

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
    live = sys.stderr if args.json else sys.stdout

    def on_progress(p: BenchTick) -> None:
        print(progress_line(p), file=live, flush=True)

    def on_level_done(r: LevelResult) -> None:
        s = r.stats
        print(f"[{r.mode} C={r.concurrency}] {r.status}: {s.output_tok_s:.1f} tok/s steady, "
              f"{s.completed} ok, {s.failed} failed", file=live, flush=True)  # fmt: skip

    def on_warning(text: str) -> None:
        print(f"warning: {text}", file=live, flush=True)

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
        return _print_repeats(args, {args.mode: results}) or _failed_levels(results)
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
        print(level_table(levels_json))
        print(sweep_verdict({args.mode: result}, slo))
        if result.aborted:
            print(f"sweep stopped: {result.aborted}")
    if greedy is not None and not args.json:
        print(greedy.text)
    return 1 if result.aborted is not None else _failed_levels(results)


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
    from dataclasses import replace

    from specdash.bench.text_tables import level_table, sweep_verdict
    from specdash.cli._host import connected, host_config, load_config
    from specdash.cli._live import StatusPrinter
    from specdash.cli._slo import slo_from
    from specdash.core.compare import compute_crossover
    from specdash.core.events import BenchTick, BenchUpdate

    cfg = load_config(args)
    modes = [m.strip() for m in args.mode.split(",") if m.strip()]
    for mode in modes:
        cfg.mode(mode)
    printer = StatusPrinter(sys.stderr if args.json else sys.stdout, host=args.host)
    done: set[tuple[str, int]] = set()

    def listen(event: object) -> None:
        if isinstance(event, BenchTick):
            return  # live lines come from the sweep's own progress callback below
        if isinstance(event, BenchUpdate):
            for row in event.rows:
                if row.status == "paused":
                    print(
                        f"[{row.mode} C={row.concurrency}] paused: {row.warning}",
                        file=sys.stderr if args.json else sys.stdout,
                        flush=True,
                    )
                if row.status in ("done", "failed") and (row.mode, row.concurrency) not in done:
                    done.add((row.mode, row.concurrency))
                    line = f"[{row.mode} C={row.concurrency}] {row.status}: {row.tok_s or 0:.1f} tok/s steady"
                    print(line, file=sys.stderr if args.json else sys.stdout, flush=True)
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
        return _print_repeats(args, repeats) or _failed_levels([r for runs in repeats.values() for r in runs])
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
            print(level_table([lv.to_json() for lv in r.levels], None if mode == modes[0] else reference))
        print()
        print(sweep_verdict({m: results[m] for m in modes if m in results}, config.slo))
        if greedy is not None:
            print(greedy.text)
    if not all(r.aborted is None for r in results.values()):
        return 1
    return _failed_levels(list(results.values()))


def _print_repeats(args: argparse.Namespace, repeats: dict[str, list[SweepResult]]) -> int:
    """The pooled report of `--repeats N`: median ± MAD per level per mode, the crossover on the medians."""
    from specdash.bench.text_tables import repeats_table
    from specdash.core.compare import compute_crossover, pool_runs

    modes = list(repeats)
    pooled = [pool_runs([r.curve() for r in repeats[m]]) for m in modes]
    aborted = [r.aborted for runs in repeats.values() for r in runs if r.aborted]
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
        for reason in aborted:
            print(f"sweep stopped: {reason}")
    return 0 if not aborted else 1


async def _greedy_texts(args: argparse.Namespace, url: str, prompts: tuple[str, ...]) -> list[str]:
    """The first `--check-greedy` prompts' outputs at temperature 0 from the server at `url`."""
    from specdash.bench.greedy import greedy_outputs
    from specdash.bench.sse import Endpoint

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
    from specdash.core.greedy import compare_outputs

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
    from specdash.core.greedy import compare_outputs
    from specdash.phases import Phase

    texts: dict[str, list[str]] = {}
    for mode in (modes[-1], modes[0]):
        if session.status.mode != mode or session.status.phase is not Phase.READY:
            await session.switch(mode)
            status = await session.wait_status([Phase.READY, Phase.CRASHED, Phase.EXITED], timeout=3600)
            if status.phase is not Phase.READY:
                raise SpecdashError(f"greedy check: {mode} did not become ready ({status.phase.value})")
        texts[mode] = await session.greedy_texts(args.check_greedy, prompts, settings)
    return compare_outputs(modes[0], modes[-1], texts[modes[0]], texts[modes[-1]])
