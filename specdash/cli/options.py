"""Every option two or more subcommands take, declared once: its name, its parser (type and bounds), its help.

`specdash.cli.commands` declares each subcommand's arguments from these; a command that takes `--duration`
judges `--duration nan` exactly as every other command that takes it does. The value parsers are in
`specdash.limits` (the bounds) and here (levels, output paths). Light on purpose: stdlib, `specdash.limits`
and `specdash.core.levels` only, so that `specdash --help` imports no implementation.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from specdash.core.levels import LEVELS_GRAMMAR, MAX_LEVEL, parse_levels
from specdash.errors import UsageError
from specdash.limits import (
    MAX_OUTPUT_LEN,
    MAX_REPEATS,
    MAX_REQUESTS,
    RUN_ID,
    SECONDS,
    TIME_SCALE,
    int_option,
)

REQUESTS = int_option(1, MAX_REQUESTS)
"""`--requests-per-level`."""
OUTPUT_LEN = int_option(1, MAX_OUTPUT_LEN)
"""`--output-len`."""
REPEATS = int_option(1, MAX_REPEATS)
"""`--repeats`."""
CONCURRENCY = int_option(1, MAX_LEVEL)
"""`--max-concurrency`."""
ENDPOINTS = ("generate", "chat", "completions")
"""What the probe can request (`specdash.bench.sse.Endpoint`'s values)."""
SLO_HELP = "judge levels against an SLO, e.g. ttft_p90=500ms,tpot_p90=50ms (attainment, goodput, largest C)"


def levels_text(text: str) -> str:
    """An argparse `type=` for `--levels`: the text, checked against the levels grammar at parse time."""
    try:
        parse_levels(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None
    return text


def output_file(text: str) -> Path:
    """An argparse `type=` for a file we will write: refused at parse time (exit 2, naming it) when it is a
    directory or its directory does not exist. What only the write can tell (permissions, a full disk, /proc)
    is a runtime error naming the path (`specdash.cli.main`)."""
    path = Path(text).expanduser()
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a directory (give a file name)")
    parent = path.parent
    if not parent.is_dir():
        why = "is not a directory" if parent.exists() else "does not exist"
        raise argparse.ArgumentTypeError(f"{text!r}: the directory {str(parent)!r} {why}")
    return path


def output_dir(text: str) -> Path:
    """An argparse `type=` for a directory we will write into (created if missing): refused when it is a file."""
    path = Path(text).expanduser()
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} exists and is not a directory")
    if not os.path.isdir(path) and any(p.exists() and not p.is_dir() for p in path.parents):
        raise argparse.ArgumentTypeError(f"{text!r}: a part of the path is a file, not a directory")
    return path


def add_config(parser: argparse.ArgumentParser) -> None:
    """`--config FILE`."""
    parser.add_argument("--config", type=Path, help="config file (default: $SPECDASH_CONFIG or the XDG path)")


def add_host_arguments(parser: argparse.ArgumentParser, *, optional: bool = False) -> None:
    """HOST plus `-J`, `-i`, `--known-hosts`, `--accept-new`, `--config`."""
    parser.add_argument(
        "host",
        metavar="HOST",
        nargs="?" if optional else None,
        help="a host from the config, an ~/.ssh/config alias, or [user@]host[:port]",
    )
    parser.add_argument("-J", dest="jump", metavar="JUMP", help="jump host, like ssh -J")
    parser.add_argument("-i", dest="identity", metavar="KEY", type=Path, help="private key, like ssh -i")
    parser.add_argument("--known-hosts", type=Path, help="known_hosts file (default: ~/.ssh/known_hosts)")
    parser.add_argument(
        "--accept-new",
        action="store_true",
        help="trust a first-seen host and record its key (OpenSSH accept-new); a changed key is always refused",
    )
    add_config(parser)


def add_store(
    parser: argparse.ArgumentParser, *, demo: bool = True, default: str = "the data dir's specdash.db"
) -> None:
    """`--db FILE` (and, with `demo`, `--demo`: the demo's store instead)."""
    group: argparse.ArgumentParser | argparse._MutuallyExclusiveGroup = (
        parser.add_mutually_exclusive_group() if demo else parser
    )
    group.add_argument("--db", type=Path, help=f"store file (default: {default})")
    if demo:
        group.add_argument("--demo", action="store_true", help="the demo's store (data dir's demo.db)")


def add_run_ids(parser: argparse.ArgumentParser, *, many: bool, help: str) -> None:  # noqa: A002 - argparse's word
    """`RUN` (or `RUN [RUN...]`): stored run ids, 1 to SQLite's largest rowid."""
    parser.add_argument("runs" if many else "run", nargs="+" if many else None, type=RUN_ID, metavar="RUN", help=help)


def add_json(parser: argparse.ArgumentParser, help: str = "print JSON") -> None:  # noqa: A002 - argparse's word
    """`--json`."""
    parser.add_argument("--json", action="store_true", help=help)


def add_wait(parser: argparse.ArgumentParser) -> None:
    """`--wait`: follow a start until ready or crashed."""
    parser.add_argument("--wait", action="store_true", help="print phases until ready (exit 0) or crashed (exit 1)")


def add_levels(parser: argparse.ArgumentParser, *, default: str | None, help: str) -> None:  # noqa: A002
    """`--levels`: concurrency levels in the one grammar, checked at parse time (kept as text)."""
    parser.add_argument("--levels", type=levels_text, default=default, help=f"concurrency levels: {help}")


def add_amount(parser: argparse.ArgumentParser, *, duration_help: str, requests_help: str) -> None:
    """`--duration SECONDS` or `--requests-per-level N` (one or the other)."""
    amount = parser.add_mutually_exclusive_group()
    amount.add_argument("--requests-per-level", type=REQUESTS, help=requests_help)
    amount.add_argument("--duration", type=SECONDS, help=duration_help)


def add_output_len(parser: argparse.ArgumentParser, *, default: int | None, help: str) -> None:  # noqa: A002
    """`--output-len N`: tokens per response."""
    parser.add_argument("--output-len", type=OUTPUT_LEN, default=default, help=help)


def add_prompts(parser: argparse.ArgumentParser) -> None:
    """`--prompts chat|code|FILE`."""
    parser.add_argument("--prompts", default="chat", help="chat, code or a JSONL file (default %(default)s)")


def add_endpoint(parser: argparse.ArgumentParser, help: str) -> None:  # noqa: A002 - argparse's word
    """`--endpoint generate|chat|completions` (default: the engine decides)."""
    parser.add_argument("--endpoint", choices=ENDPOINTS, help=help)


def add_repeats(parser: argparse.ArgumentParser, *, default: int | None, help: str) -> None:  # noqa: A002
    """`--repeats N`, 1 to `MAX_REPEATS`."""
    parser.add_argument("--repeats", type=REPEATS, default=default, help=help)


def add_time_scale(parser: argparse.ArgumentParser, help: str) -> None:  # noqa: A002 - argparse's word
    """`--time-scale X`: the simulator's startup durations times X."""
    parser.add_argument("--time-scale", type=TIME_SCALE, help=help)


def add_max_concurrency(parser: argparse.ArgumentParser) -> None:
    """`--max-concurrency C`: drop levels above C."""
    parser.add_argument("--max-concurrency", type=CONCURRENCY, help="drop levels above this")


def add_slo(parser: argparse.ArgumentParser) -> None:
    """`--slo` (bench, compare, report)."""
    parser.add_argument("--slo", help=SLO_HELP)


def add_tpot(parser: argparse.ArgumentParser, help: str) -> None:  # noqa: A002 - argparse's word
    """`--tpot p50|p90`."""
    parser.add_argument("--tpot", choices=["p50", "p90"], default="p50", help=help)


def add_force(parser: argparse.ArgumentParser, what: str) -> None:
    """`--force`: use runs whose workloads differ."""
    parser.add_argument("--force", action="store_true", help=f"{what} runs whose workloads differ (marked as such)")


def add_screenshot_dir(parser: argparse.ArgumentParser) -> None:
    """`--screenshot-dir DIR`: where the command palette's Screenshot saves its SVG (created if missing)."""
    parser.add_argument(
        "--screenshot-dir",
        type=output_dir,
        metavar="DIR",
        help="where the palette's Screenshot saves (created if missing; default: the current directory, "
        "or the specdash data directory when that is not writable)",
    )


PATH_TYPES: tuple[object, ...] = (Path, output_file, output_dir)
"""Argument types that are local paths: any bytes are allowed there (every other argument must be UTF-8)."""
LEVELS_HELP = f"{LEVELS_GRAMMAR}; 1 to {MAX_LEVEL}"
"""The grammar and range of `--levels`, for help texts."""
