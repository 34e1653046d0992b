"""Fixtures shared by every test tier.

Deterministic by construction: config and data paths point into `tmp_path`, so no test reads or writes
the developer's own files.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point every XDG location and SPECDASH_CONFIG at the test's own directory."""
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(var, str(tmp_path / "xdg" / var.lower()))
    monkeypatch.setenv("SPECDASH_CONFIG", str(tmp_path / "xdg" / "config.toml"))
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TEXTUAL", raising=False)
