"""Drive a terminal program in a detached tmux session, as a user would: send keys, read the screen.

The program's stderr is never redirected (Textual renders there). Waiting is done by polling the captured
pane for the expected text with a deadline, never by fixed sleeps.
"""

from __future__ import annotations

import shlex
import subprocess
import time
import uuid
from pathlib import Path


class TmuxSession:
    """One detached tmux session running `command` in a `width` x `height` terminal."""

    def __init__(self, command: list[str], *, width: int = 120, height: int = 36, env: dict[str, str] | None = None):
        self.name = f"specdash-e2e-{uuid.uuid4().hex[:8]}"
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
        # COLUMNS/LINES leak in from the test runner and would override the pane size in Textual.
        line = f"env -u NO_COLOR -u TEXTUAL -u COLUMNS -u LINES TERM=xterm-256color {exports} {shlex.join(command)}"
        subprocess.run(
            ["tmux", "new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height), line],
            check=True,
        )
        # A tmux server that already runs may size new windows after its other clients: pin ours.
        subprocess.run(["tmux", "resize-window", "-t", self.name, "-x", str(width), "-y", str(height)], check=False)

    def screen(self) -> str:
        """The visible pane as text."""
        out = subprocess.run(["tmux", "capture-pane", "-p", "-t", self.name], capture_output=True, text=True)
        return out.stdout

    def alive(self) -> bool:
        """Whether the session (and so the program) is still running."""
        return subprocess.run(["tmux", "has-session", "-t", self.name], capture_output=True).returncode == 0

    def wait_for(self, text: str, timeout: float = 30.0) -> str:
        """Poll the screen until `text` shows, and return the screen; fail with the last screen on timeout."""
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            if not self.alive():
                break
            time.sleep(0.05)
        raise AssertionError(f"{text!r} not on screen within {timeout} s; last screen:\n{screen}")

    def wait_gone(self, timeout: float = 15.0) -> None:
        """Poll until the program has exited (the session ends with it); fail with the last screen."""
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            if not self.alive():
                return
            screen = self.screen()
            time.sleep(0.05)
        raise AssertionError(f"still running after {timeout} s; last screen:\n{screen}")

    def send(self, *keys: str) -> None:
        """Send keys (tmux key names, e.g. `s`, `Enter`, `C-p`)."""
        subprocess.run(["tmux", "send-keys", "-t", self.name, *keys], check=True)

    def save(self, path: Path) -> None:
        """Write the current screen to a file (for failure reports)."""
        path.write_text(self.screen())

    def kill(self) -> None:
        """End the session (and the program) if it still runs."""
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)
