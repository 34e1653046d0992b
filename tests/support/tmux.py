"""Drive a terminal program in a detached tmux session, as a user would: send keys, read the screen.

The program's stderr is never redirected (Textual renders there). Waiting is done by polling the captured
pane for the expected text with a deadline, never by fixed sleeps.
"""

from __future__ import annotations

import shlex
import subprocess
import uuid
from pathlib import Path

from tests.support.eventually import eventually_sync


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

        def shown() -> str:
            screen = self.screen()
            if text not in screen and not self.alive():
                raise AssertionError(f"the program ended before {text!r} showed; last screen:\n{screen}")
            return screen

        return eventually_sync(shown, until=lambda screen: text in screen, timeout=timeout, what=f"{text!r} on screen")

    def wait_gone(self, timeout: float = 15.0) -> None:
        """Poll until the program has exited (the session ends with it); fail with the last screen."""
        eventually_sync(
            lambda: self.screen() if self.alive() else None, until=lambda screen: screen is None, timeout=timeout,
            what="the program exits (still running, last screen)",
        )  # fmt: skip

    def send(self, *keys: str) -> None:
        """Send keys (tmux key names, e.g. `s`, `Enter`, `C-p`)."""
        subprocess.run(["tmux", "send-keys", "-t", self.name, *keys], check=True)

    def save(self, path: Path) -> None:
        """Write the current screen to a file (for failure reports)."""
        path.write_text(self.screen())

    def kill(self) -> None:
        """End the session (and the program) if it still runs."""
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)
