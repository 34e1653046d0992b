"""The CLI's contract: help works, usage errors exit 2 with one line and no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


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


def test_a_reader_that_goes_away_ends_us_quietly(tmp_path: Path) -> None:
    """`specdash replay --json LOG | head -0`: the pipe closes under us; no "internal error", no traceback,
    the shell's SIGPIPE status."""
    import subprocess
    import sys

    log = tmp_path / "server.log"
    log.write_text(
        "".join(f"[2026-12-01 10:00:00 TP0] Decode batch. #running-req: 1, line {i}\n" for i in range(20000))
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "specdash", "replay", "--json", str(log)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader goes away before the first line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert "internal error" not in err and "Traceback" not in err, err
