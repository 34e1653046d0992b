"""The `specdash` command line: `commands` declares every subcommand, `NAME.py` implements subcommand NAME.

The parser (`specdash.cli.commands`) is light: a subcommand's implementation, `specdash.cli.NAME.run(args)`,
is imported only when it runs, so `--help` and `--version` answer at once.
Errors, in this one place: a `SpecdashError` prints its message alone and exits with its code (2 usage,
1 runtime); an `OSError` about a file (a full disk, /proc, a directory where a file belongs, no permission)
prints the file and the reason and exits 1; anything unexpected prints one line and a hint about `--debug`,
which shows the traceback.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import sys
from collections.abc import Sequence

from specdash.cli.commands import build_parser
from specdash.errors import EXIT_RUNTIME, EXIT_SIGPIPE, EXIT_USAGE, SpecdashError

__all__ = ["build_parser", "main"]


def _tolerant_output() -> None:
    """Text we print that cannot be encoded (a lone surrogate from a non-UTF-8 file name, say) is written
    escaped instead of ending the command with UnicodeEncodeError after its work is done."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            with contextlib.suppress(ValueError, io.UnsupportedOperation):
                stream.reconfigure(errors="backslashreplace")


def shown(message: str) -> str:
    """An error message as printed: whatever a server, a host or a file put in it cannot act on the terminal
    (`escape_controls`, line by line: a message's own line breaks are kept). The last stop of every error."""
    from specdash.safetext import escape_controls

    return "\n".join(escape_controls(line) for line in message.split("\n"))


def file_error(exc: OSError) -> str | None:
    """`cannot write /dev/full: No space left on device` for an OSError about a named file, else None."""
    if exc.filename is None:
        return None
    path = os.fsdecode(exc.filename)
    reason = exc.strerror or type(exc).__name__
    if exc.filename2 is not None:
        path = f"{path} -> {os.fsdecode(exc.filename2)}"
    # A directory of ours that cannot be made is often a bad XDG variable: say which one it came from.
    for name in ("XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
        value = os.environ.get(name, "")
        if value and (path == value or path.startswith(value.rstrip("/") + "/")):
            return f"{path}: {reason} (from ${name}={value})"
    return f"{path}: {reason}"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `specdash` console script."""
    _tolerant_output()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, a usage error: the code, for callers that run us in-process
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        code = int(importlib.import_module(f"specdash.cli.{args.command}").run(args))
        try:
            sys.stdout.flush()  # here, not at exit: `specdash runs > /dev/full` is an error, not a silent loss
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise SpecdashError(f"cannot write the output: {exc.strerror or exc}") from None
        return code
    except SpecdashError as exc:
        if args.debug:
            _print_traceback(exc)
        print(f"specdash: error: {shown(exc.message)}", file=sys.stderr)
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
    except OSError as exc:
        message = file_error(exc)
        if message is None:
            return _internal(exc, args.debug)
        if args.debug:
            _print_traceback(exc)
        print(f"specdash: error: {shown(message)}", file=sys.stderr)
        return EXIT_RUNTIME
    except Exception as exc:  # noqa: BLE001 - the last line of defence: no traceback unless --debug
        return _internal(exc, args.debug)


def _print_traceback(exc: BaseException) -> None:
    # The interpreter's own printer: the `traceback` module costs every command ~20 ms to import.
    sys.__excepthook__(type(exc), exc, exc.__traceback__)


def _internal(exc: BaseException, debug: bool) -> int:
    if debug:
        _print_traceback(exc)
    else:
        print(
            f"specdash: internal error: {type(exc).__name__}: {shown(str(exc))} (run with --debug for the traceback)",
            file=sys.stderr,
        )
    return EXIT_RUNTIME
