"""The `specdash` command line: one subcommand per module in this package.

Each subcommand module defines `NAME`, `HELP`, `add_arguments(parser)` and `run(args) -> int`, and keeps
heavy imports (asyncssh, aiohttp, textual) inside `run` so that `specdash --help` stays fast.
Errors: a `SpecdashError` prints its message alone and exits with its code (2 usage, 1 runtime);
anything unexpected prints one line and a hint about `--debug`, which shows the traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import traceback
from collections.abc import Sequence
from types import ModuleType

from specdash import __version__
from specdash.errors import EXIT_RUNTIME, EXIT_SIGPIPE, EXIT_USAGE, SpecdashError

# Order is the order shown in --help.
COMMANDS: tuple[str, ...] = (
    "connect",
    "demo",
    "up",
    "adopt",
    "down",
    "status",
    "logs",
    "switch",
    "advise",
    "bench",
    "runs",
    "compare",
    "report",
    "tune",
    "export",
    "replay",
    "sim",
    "config",
)


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors exit 2 with one line and no usage dump spilled over the terminal."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n(see '{self.prog} --help')\n")


def _modules() -> list[ModuleType]:
    return [importlib.import_module(f"specdash.cli.{name}") for name in COMMANDS]


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (also used by the docs and the tests)."""
    parser = _Parser(
        prog="specdash",
        description="Control panel for LLM inference servers with speculative decoding (SGLang, vLLM).",
    )
    parser.add_argument("--version", action="version", version=f"specdash {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for bug reports")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for module in _modules():
        p = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `specdash` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "_run", None) is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args._run(args))
    except SpecdashError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"specdash: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("specdash: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`specdash replay --json LOG | head`): stop quietly, as `cat` does. Python would
        # complain again flushing stdout at exit, so stdout points at /dev/null first (Python's SIGPIPE note).
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_SIGPIPE
    except Exception as exc:  # noqa: BLE001 - the last line of defence: no traceback unless --debug
        if args.debug:
            traceback.print_exc()
        else:
            print(
                f"specdash: internal error: {type(exc).__name__}: {exc} (run with --debug for the traceback)",
                file=sys.stderr,
            )
        return EXIT_RUNTIME
