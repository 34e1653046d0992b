"""The real CLI in a subprocess, isolated, with its peak memory measured (`wait4` rusage of that child)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Done:
    """How one CLI run ended."""

    code: int
    stdout: str
    stderr: str
    peak_rss_mib: float
    """The child's peak resident set (ru_maxrss of that process alone)."""

    def errors(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("specdash") and "error" in line]


def cli_env(home: Path, config: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SSH_AUTH_SOCK", "SPECDASH_CONFIG")}
    env["HOME"] = str(home)
    if config is not None:
        env["SPECDASH_CONFIG"] = str(config)
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        env[var] = str(home / var.lower())
    return env


_LAUNCHER = """
import os, signal, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(str(usage.ru_maxrss))
code = os.waitstatus_to_exitcode(status)
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"""
"""Runs the CLI as the child of a small process and writes that child's ru_maxrss to a file. Linux keeps a
process's peak RSS across exec, so a CLI forked straight from a big pytest process (an xdist worker holds
~300 MiB) would report the worker's memory as its own; forked from this small launcher it reports its own."""


def run_cli(
    argv: tuple[str, ...],
    home: Path,
    config: Path | None = None,
    timeout: float = 120.0,
    env_over: dict[str, str] | None = None,
) -> Done:
    """`python -m specdash ARGV` with its own HOME and XDG dirs (`env_over` replaces some of the environment);
    kills it (and fails) after `timeout`."""
    home.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryDirectory() as tmp:
        peak_file = Path(tmp) / "peak"
        env = {**cli_env(home, config), **(env_over or {})}
        if os.environ.get("SPECDASH_SRC_UNDER_TEST"):  # run an older checkout (to see a test fail before its fix)
            env["PYTHONPATH"] = os.environ["SPECDASH_SRC_UNDER_TEST"]
        proc = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER, str(peak_file), sys.executable, "-m", "specdash", *argv],
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=home,  # not the source tree: `python -m` puts the working directory first on sys.path
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                os.wait4(proc.pid, 0)
                raise AssertionError(f"specdash {' '.join(argv)} hung for {timeout:g} s")
            time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(status)
        peak_mib = int(peak_file.read_text()) / 1024 if peak_file.exists() else usage.ru_maxrss / 1024
        record_peak(argv, peak_mib)
        out.seek(0)
        err.seek(0)
        return Done(
            proc.returncode,
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
            peak_mib,
        )


PEAKS: list[tuple[str, float]] = []
"""(argv, peak RSS MiB) of every run in this session (reported by conftest at the end)."""


def record_peak(argv: tuple[str, ...], mib: float) -> None:
    PEAKS.append((" ".join(a if len(a) < 40 else a[:37] + "..." for a in argv), mib))


MEMORY_BOUND_MIB = 300.0
"""Peak RSS allowed for one CLI run, whatever it was fed (an idle `specdash bench` is ~70-120 MiB)."""


def assert_clean_failure(done: Done, code: int, *needles: str) -> None:
    """One error line naming what and where, the documented exit code, no traceback, bounded memory."""
    assert "Traceback" not in done.stdout + done.stderr, done.stderr[-3000:]
    assert done.code == code, (done.code, done.stderr[-2000:])
    errors = done.errors()
    assert len(errors) == 1, done.stderr[-2000:]
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
    assert done.peak_rss_mib < MEMORY_BOUND_MIB, done.peak_rss_mib
