"""The CLI called in-process, for tests of parsing and printing (no interpreter start per case).

`cli("replay", path, "--json")` runs `specdash.cli.main` with the given argv and returns what a subprocess run
would: the exit status and the text written to stdout and stderr. `env` entries are set for the call only.
The true subprocess tests (exit codes of `python -m specdash`, SIGPIPE, the console script) stay in
`tests/integration/test_cli.py`.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
from collections.abc import Mapping

import pytest

from specdash.cli import main


def cli(*argv: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `specdash ARGV` in this process; its exit status and output, as `subprocess.run` gives them."""
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        for name, value in (env or {}).items():
            patch.setenv(name, value)
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse's own usage errors and --help
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    return subprocess.CompletedProcess(["specdash", *argv], code, out.getvalue(), err.getvalue())
