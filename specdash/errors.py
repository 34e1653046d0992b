"""The one error type that reaches the user.

Every boundary (config files, the CLI, SSH, HTTP, remote processes) turns what went wrong into a
`SpecdashError` with a message that names what and where. The CLI prints that message alone, without a
traceback (unless `--debug`), and exits with the error's code: 2 for usage errors, 1 for runtime errors.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

EXIT_RUNTIME = 1
EXIT_USAGE = 2
EXIT_SIGPIPE = 141
"""The reader of our output went away (`| head`): what a shell reports for a tool ended by SIGPIPE."""


class SpecdashError(Exception):
    """A failure with a message meant for the user."""

    exit_code: int = EXIT_RUNTIME

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(SpecdashError):
    """Bad input from the user: a wrong flag, host string, config key or value. Exit code 2."""

    exit_code = EXIT_USAGE


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`; did you mean 'bench'?` when `word` is close to one of `known` (a typo), else an empty string."""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""
