"""Fixtures shared by every test tier.

Deterministic by construction: config and data paths point into `tmp_path`, so no test reads or writes
the developer's own files.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.fake_server import FakeServer


@pytest.fixture(autouse=True)
def _isolated_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point every XDG location and SPECDASH_CONFIG at the test's own directory."""
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(var, str(tmp_path / "xdg" / var.lower()))
    monkeypatch.setenv("SPECDASH_CONFIG", str(tmp_path / "xdg" / "config.toml"))
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TEXTUAL", raising=False)


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    """The fake SSE server on a loopback port, default behaviour (tests change `server.config` as they go)."""
    async with FakeServer() as srv:
        yield srv
