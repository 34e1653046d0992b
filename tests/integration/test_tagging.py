"""The stream wrapper and the reaper, run by a local shell exactly as sshd would run them.

sshd starts each exec channel's shell in a new session; `start_new_session=True` reproduces that.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from specdash.remote.tagging import PID_MARKER, PROC_DIR, reap_script, wrap_streamed
from tests.support.eventually import eventually_sync


def _spawn(command: str, home: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["bash", "-c", command],
        env={**os.environ, "HOME": str(home)},
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _reap(script: str, home: Path) -> list[int]:
    out = subprocess.run(["bash", "-c", script], env={**os.environ, "HOME": str(home)}, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return [int(word) for word in out.stdout.split()]


@pytest.fixture
def tagged(tmp_path: Path) -> tuple[subprocess.Popen[str], int]:
    proc = _spawn(wrap_streamed('echo "it\'s here"; exec sleep 60', "c0ffee01", 1), tmp_path)
    assert proc.stdout is not None
    marker, pid_text = proc.stdout.readline().split()
    assert marker == PID_MARKER and int(pid_text) == proc.pid  # exec kept the PID
    assert proc.stdout.readline() == "it's here\n"  # quoting survived
    return proc, proc.pid


def test_wrapper_records_pid_and_tag(tmp_path: Path, tagged: tuple[subprocess.Popen[str], int]) -> None:
    proc, pid = tagged
    assert (tmp_path / PROC_DIR / "c0ffee01" / f"1.{pid}").read_text().strip() == str(pid)
    # The echo comes before `exec sleep`: while the exec replaces the process image, its environ reads empty.
    environ = eventually_sync(
        lambda: Path(f"/proc/{pid}/environ").read_bytes(), until=bool, timeout=10, what="the wrapped process's environ"
    )
    assert b"SPECDASH_TAG=c0ffee01.1\0" in environ
    proc.kill()
    proc.wait()


def test_reap_spares_the_live_generation_and_kills_older_ones(
    tmp_path: Path, tagged: tuple[subprocess.Popen[str], int]
) -> None:
    proc, pid = tagged
    assert _reap(reap_script("c0ffee01", keep_generation=1), tmp_path) == []
    assert proc.poll() is None
    assert _reap(reap_script("c0ffee01", keep_generation=2), tmp_path) == [pid]
    assert proc.wait(timeout=5) == -15  # SIGTERM to the group
    assert not (tmp_path / PROC_DIR / "c0ffee01" / f"1.{pid}").exists()


def test_reap_never_kills_an_untagged_pid(tmp_path: Path) -> None:
    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)
    pidfile = tmp_path / PROC_DIR / "c0ffee01" / f"1.{stranger.pid}"
    pidfile.parent.mkdir(parents=True)
    pidfile.write_text(f"{stranger.pid}\n")  # as if the PID had been recycled
    try:
        assert _reap(reap_script("c0ffee01"), tmp_path) == []
        assert stranger.poll() is None
        assert not pidfile.exists()  # the stale record goes
    finally:
        stranger.kill()
        stranger.wait()


def test_reap_one_pid_only(tmp_path: Path) -> None:
    procs = [_spawn(wrap_streamed("exec sleep 60", "c0ffee01", 1), tmp_path) for _ in range(2)]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().startswith(PID_MARKER)
    assert _reap(reap_script("c0ffee01", only_pid=procs[0].pid), tmp_path) == [procs[0].pid]
    assert procs[0].wait(timeout=5) == -15
    assert procs[1].poll() is None
    procs[1].kill()
    procs[1].wait()
