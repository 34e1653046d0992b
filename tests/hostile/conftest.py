"""The hostile tier: print the peak RSS measured per CLI run at the end (`-rA` or `-s` shows it)."""

from __future__ import annotations

import pytest

from tests.support.hostile_cli import PEAKS


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if PEAKS:
        top = max(PEAKS, key=lambda p: p[1])
        terminalreporter.write_line(
            f"hostile tier: {len(PEAKS)} CLI runs, peak RSS max {top[1]:.0f} MiB ({top[0]}), "
            f"median {sorted(p[1] for p in PEAKS)[len(PEAKS) // 2]:.0f} MiB"
        )
