"""End to end: the installed `specdash demo` in a real terminal (tmux), driven by keys, read from the screen."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.eventually import eventually_sync
from tests.support.tmux import TmuxSession

SPECDASH = Path(sys.executable).parent / "specdash"
SCALE = "0.0107"  # short starts; an odd value so this test's simulator can be told from any other


def sims_alive() -> list[str]:
    out = subprocess.run(["pgrep", "-af", "--", f"sim-time-scale {SCALE}"], capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if "pgrep" not in line]


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (make test installs it)")
def test_demo_start_ready_stop_quit(tmp_path: Path) -> None:
    term = TmuxSession([str(SPECDASH), "demo", "--time-scale", SCALE], width=120, height=36)
    try:
        term.wait_for("eagle3-dynamic", timeout=30)  # the mode list is there
        screen = term.wait_for("STOPPED", timeout=10)
        assert "connected" in screen
        term.send("2", "s")
        screen = term.wait_for("READY", timeout=60)
        assert "startup" in screen and "eagle3" in screen  # the finished startup's summary
        term.wait_for("fired up and ready to roll", timeout=10)  # the log view follows the end
        assert sims_alive()  # the simulator runs (started through the demo's SSH server)
        term.send("x")
        term.wait_for("Stop eagle3", timeout=10)  # the confirmation names what will happen
        term.send("y")
        term.wait_for("STOPPED", timeout=30)
        assert sims_alive() == []
        term.send("q")
        term.wait_gone(timeout=15)
    finally:
        term.save(tmp_path / "last_screen.txt")
        term.kill()
    assert sims_alive() == []


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (make test installs it)")
def test_closing_the_terminal_leaves_no_simulator_behind(tmp_path: Path) -> None:
    term = TmuxSession([str(SPECDASH), "demo", "--time-scale", SCALE], width=120, height=36)
    try:
        term.wait_for("eagle3-dynamic", timeout=30)
        term.send("1", "s")
        term.wait_for("READY", timeout=60)
        assert sims_alive()
    finally:
        term.save(tmp_path / "last_screen.txt")
        term.kill()  # SIGHUP to the demo, as when a terminal window is closed
    eventually_sync(sims_alive, until=lambda sims: not sims, timeout=30, what="no simulator left (alive)")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (make test installs it)")
def test_make_demo_tour_tells_the_whole_story(tmp_path: Path) -> None:
    """What `make demo` runs: the tour starts baseline, sweeps, switches to EAGLE-3, sweeps, and ends on the
    crossover; a key then hands over the keyboard and `q` quits with nothing left running."""
    term = TmuxSession([str(SPECDASH), "demo", "--autoplay", "--time-scale", SCALE], width=160, height=45)
    try:
        term.wait_for("Autoplay", timeout=30)
        term.wait_for("baseline  10", timeout=120)  # baseline's last level is in the table
        screen = term.wait_for("sweep done", timeout=120)
        assert "eagle3    10" in screen and "✓" in screen
        assert "beats baseline" in screen or "does not beat" in screen  # the crossover sentence
        term.send("q")
        term.wait_gone(timeout=20)
    finally:
        term.save(tmp_path / "last_screen.txt")
        term.kill()
    assert sims_alive() == []
