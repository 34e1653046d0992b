"""`specdash advise HOST --mode M | --log FILE [--json]`: where a start's time goes and what would cut it
(`core.advisor`), from the last start of the mode on the host (its log, kept in the run record) or from any
saved log. With two starts of the mode on the host, advice applied since the earlier one is shown with its
measured saving against the prediction."""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
from pathlib import Path

from specdash.cli._host import add_host_arguments
from specdash.errors import UsageError

NAME = "advise"
HELP = "startup advisor: where a start's time goes and what would cut it, with evidence and predicted savings"

MAX_LOG_BYTES = 64 * 1024 * 1024
"""A start's log is read whole; more than this is not one start (or not a log)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_host_arguments(parser, optional=True)
    parser.add_argument("--mode", "-m", help="the mode whose last start on HOST is read")
    parser.add_argument("--log", type=Path, help="a saved server log instead of a host's (HOST not needed)")
    parser.add_argument(
        "--max-concurrency",
        type=int,
        default=None,
        metavar="N",
        help="the largest concurrency the sweeps and the policy use (default: the largest default level, 100)",
    )
    parser.add_argument("--engine", choices=("auto", "sglang", "vllm"), default="auto", help="default: detected")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    from specdash.core.levels import DEFAULT_LEVELS, MAX_LEVEL

    used = args.max_concurrency if args.max_concurrency is not None else max(DEFAULT_LEVELS)
    if not 1 <= used <= MAX_LEVEL:
        raise UsageError(f"--max-concurrency {used}: must be 1 to {MAX_LEVEL}")
    if args.log is not None:
        return _show([_read_log(args.log)], used, args)
    if not args.host or not args.mode:
        raise UsageError("advise needs HOST and --mode M (the mode's last start there), or --log FILE")
    return asyncio.run(_from_host(args, used))


def _read_log(path: Path) -> str:
    from specdash.limits import read_regular_file

    try:
        data = read_regular_file(path, MAX_LOG_BYTES, "log")
    except FileNotFoundError:
        raise UsageError(f"--log {path}: no such file") from None
    except OSError as exc:
        raise UsageError(f"--log {path}: {exc.strerror or exc}") from None
    return data.decode("utf-8", errors="replace")


async def _from_host(args: argparse.Namespace, used: int) -> int:
    from specdash.cli._host import current_run
    from specdash.server.lifecycle import run_framed

    async with current_run(args) as (session, cfg, _record):
        cfg.mode(args.mode)
        runs = f"{session.host_config.state_dir.rstrip('/')}/runs"
        runs = runs.replace("~", "$HOME", 1) if runs.startswith("~") else shlex.quote(runs)
        # The newest run directories first; each one's record names its mode.
        _, listing = await run_framed(
            session.host,
            f'for d in $(ls -td {runs}/*/ 2>/dev/null | head -n 200); do printf "%s\\t" "$d"; '
            'head -c 4096 "$d/run.json" 2>/dev/null | head -n 1; done',
        )
        dirs = []
        for line in listing.splitlines():
            where, _, meta = line.partition("\t")
            try:
                mode = json.loads(meta).get("mode")
            except (json.JSONDecodeError, AttributeError):
                continue
            if mode == args.mode:
                dirs.append(where.rstrip("/"))
            if len(dirs) == 2:
                break
        if not dirs:
            raise UsageError(f"no start of {args.mode} is recorded on {session.label}: start it once first")
        logs = []
        for where in reversed(dirs):  # oldest first
            _, text = await run_framed(session.host, f"head -c {MAX_LOG_BYTES} {shlex.quote(where)}/server.log")
            logs.append(text)
        commands = []
        for where in reversed(dirs):
            _, meta = await run_framed(session.host, f"head -c 65536 {shlex.quote(where)}/run.json")
            try:
                commands.append(" ".join(json.loads(meta).get("command", [])))
            except (json.JSONDecodeError, AttributeError, TypeError):
                commands.append("")
    return _show(logs, used, args, commands)


def _show(logs: list[str], used: int, args: argparse.Namespace, commands: list[str] | None = None) -> int:
    from specdash.core.advisor import AdvisorError, advise, measured_saving, report_text

    where = f"--log {args.log}" if args.log is not None else f"{args.host} --mode {args.mode}"
    try:
        reports = [advise(text.splitlines(), used, args.engine) for text in logs]
    except AdvisorError as exc:
        raise UsageError(f"advise {where}: {exc}") from None
    latest = reports[-1]
    applied = []
    if len(reports) == 2 and commands is not None:
        before = reports[0]
        for advice in before.advice:
            token = advice.flag.split()[0]
            flag_now = token.startswith("--") and token in commands[1] and token not in commands[0]
            cache_now = not token.startswith("--") and not any(a.flag == advice.flag for a in latest.advice)
            if flag_now or cache_now:
                measured = measured_saving(before, latest, advice)
                applied.append(
                    {"advice": advice.title, "predicted_s": round(advice.saving_s, 1), "measured_s": round(measured, 1)}
                )
    if args.json:
        print(json.dumps({**latest.as_dict(), "applied_since_previous_start": applied}, indent=2))
        return 0
    print("\n".join(report_text(latest)))
    for a in applied:
        print(
            f"applied since the previous start: {a['advice']}: saved {a['measured_s']:.0f} s "
            f"(predicted {a['predicted_s']:.0f} s)"
        )
    return 0
