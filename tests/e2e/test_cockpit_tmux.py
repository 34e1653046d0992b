"""End to end at 80x24, the smallest terminal people use: the installed `specdash demo` in tmux starts a
mode, shows a whole log line, zooms and wraps the log, sweeps on its own page, and `q` asks before it ends
the running sweep."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.eventually import eventually_sync
from tests.support.tmux import TmuxSession

SPECDASH = Path(sys.executable).parent / "specdash"
SCALE = "0.0109"  # short starts; an odd value so this test's simulator can be told from any other


def sims_alive() -> list[str]:
    out = subprocess.run(["pgrep", "-af", "--", f"sim-time-scale {SCALE}"], capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if "pgrep" not in line]


def wait_screen(term: TmuxSession, check: Callable[[str], bool], what: str, timeout: float = 10.0) -> str:
    """Poll the screen until `check` holds; fail with the last screen."""
    return eventually_sync(term.screen, until=check, timeout=timeout, what=f"{what} on screen")


def log_rows(screen: str) -> list[str]:
    """The log view's rows: what is inside the log panel's border."""
    return [row.strip("│ ") for row in screen.splitlines() if row.startswith("│")]


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (make test installs it)")
def test_80x24_start_read_zoom_sweep_and_quit_with_confirmation(tmp_path: Path) -> None:
    term = TmuxSession([str(SPECDASH), "demo", "--time-scale", SCALE], width=80, height=24)
    try:
        screen = term.wait_for("Sweep + charts", timeout=30)  # small terminal: two pages
        assert "Server + log" in screen
        term.wait_for("STOPPED", timeout=30)
        term.send("1", "s")
        term.wait_for("READY", timeout=90)
        screen = term.wait_for("Uvicorn running on", timeout=20)
        # A whole log line at 80 columns: uvicorn's line is 80 characters with its timestamp; 70 show.
        (uvicorn,) = [row for row in log_rows(screen) if "Uvicorn running on" in row]
        assert len(uvicorn) >= 70 and re.search(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] INFO: ", uvicorn), uvicorn
        term.send("t")  # without the timestamp the whole line fits
        screen = term.wait_for("(Press CTRL+C to quit)", timeout=30)
        assert "INFO:     Uvicorn running on http://127.0.0.1:" in screen

        term.send("Tab", "z")  # focus the log, zoom it
        # The log's border moves right under the header: the log has the screen.
        screen = wait_screen(term, lambda s: s.splitlines()[1].startswith("╭─ Log"), "the zoomed log", timeout=30)
        assert "Modes" not in screen and "Server + log" not in screen
        term.send("w")
        term.wait_for("wrapped", timeout=30)
        term.send("Escape")
        term.wait_for("Modes", timeout=30)

        term.send("b")
        term.wait_for("concurrency levels", timeout=30)
        term.send("Enter")  # the default levels: the sweep is quit long before its end anyway
        screen = term.wait_for("tok/s", timeout=30)  # the sweep's page came up with its table
        assert "accept" in screen and "Uvicorn" not in screen
        assert sims_alive()

        term.send("q")
        screen = term.wait_for("Quit specdash?", timeout=30)
        assert "The running sweep stops" in screen
        term.send("n")  # nothing happens: the dialog goes, the sweep and the dashboard stay
        wait_screen(term, lambda s: "Quit specdash?" not in s, "no quit dialog", timeout=30)
        assert term.alive() and "Quit specdash?" not in term.screen() and sims_alive()
        term.send("q")
        term.wait_for("Quit specdash?", timeout=30)
        term.send("y")
        term.wait_gone(timeout=30)
    finally:
        term.save(tmp_path / "last_screen.txt")
        term.kill()
    # The demo stops its simulator on the way out.
    eventually_sync(sims_alive, until=lambda sims: not sims, timeout=30, what="no simulator left (alive)")
