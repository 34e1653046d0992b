"""The CLI's contract: help works, usage errors exit 2 with one line and no traceback."""

from __future__ import annotations

import subprocess
import sys


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specdash", *args], capture_output=True, text=True)


def test_help_lists_usage() -> None:
    out = run_cli("--help")
    assert out.returncode == 0
    assert "usage: specdash" in out.stdout


def test_unknown_flag_is_a_usage_error_without_traceback() -> None:
    out = run_cli("--no-such-flag")
    assert out.returncode == 2
    assert "unrecognized arguments: --no-such-flag" in out.stderr
    assert "Traceback" not in out.stderr
