"""Fixtures shared by every test tier.

Deterministic by construction: config and data paths point into `tmp_path`, so no test reads or writes
the developer's own files.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator
from pathlib import Path

import pytest

from tests.support import cpu_lock, durations
from tests.support.fake_server import FakeServer

_TIMINGS: list[str] = []
"""Recovery times measured by the reliability tier (its `timing()`), gathered from the tests' reports."""


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Runs in the main process, also for reports coming from pytest-xdist workers."""
    if report.when == "teardown":
        _TIMINGS.extend(str(value) for name, value in report.user_properties if name == "timing")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _TIMINGS:
        terminalreporter.section("reliability timings")
        for line in _TIMINGS:
            terminalreporter.write_line(line)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files slowest first (tests/support/durations.py: xdist's workers take them in this order)."""
    rank = durations.order([item.nodeid.split("::")[0] for item in items], durations.load())
    items.sort(key=lambda item: rank[item.nodeid.split("::")[0]])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    """A test marked `exclusive_cpu` runs alone on the machine; the others share it (tests/support/cpu_lock.py).
    Held around setup, call and teardown, so the wait is in no phase's reported duration."""
    with cpu_lock.hold(exclusive=item.get_closest_marker("exclusive_cpu") is not None):
        return (yield)


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
