"""Snapshots of the dashboard's main states, at a fixed size, built through `make_app` with a frozen clock.

Regenerate with `env -u NO_COLOR -u TEXTUAL .venv/bin/pytest tests/ui/test_snapshots.py --snapshot-update`
and look at every changed SVG before committing it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from textual.pilot import Pilot

from specdash.config import UIConfig
from specdash.ui.app import SpecdashApp, make_app
from specdash.ui.widgets.logview import LogView
from tests.support import scenarios as sc
from tests.support.fake_session import Event, FakeSession
from tests.support.settle import settle_screen

SIZE = (120, 36)

SnapCompare = Callable[..., bool]


def app_for(events: list[Event]) -> SpecdashApp:
    session = FakeSession(events, label="root@gpu-box")
    return make_app(session, config_ui=UIConfig(bell=False), clock=lambda: sc.NOW, live=False)


@pytest.mark.parametrize(
    "events",
    [
        pytest.param(sc.stopped(), id="stopped"),
        pytest.param(sc.loading(), id="loading"),
        pytest.param(sc.capturing(), id="capturing"),
        pytest.param(sc.ready_with_bench(), id="ready_bench"),
        pytest.param(sc.crashed(), id="crashed"),
        pytest.param(sc.reconnecting(), id="reconnecting"),
    ],
)
def test_state(snap_compare: SnapCompare, events: list[Event]) -> None:
    assert snap_compare(app_for(events), terminal_size=SIZE, run_before=settle_screen)


def test_crash_jump(snap_compare: SnapCompare) -> None:
    assert snap_compare(app_for(sc.crashed()), press=["c"], terminal_size=SIZE, run_before=settle_screen)


def test_confirm_stop(snap_compare: SnapCompare) -> None:
    assert snap_compare(app_for(sc.ready_with_bench()), press=["x"], terminal_size=SIZE, run_before=settle_screen)


SIZES = [(80, 24), (100, 30), (160, 45), (200, 60)]
"""The layouts by terminal size: two pages (80x24, 100x30), a side column beside the log (160x45, 200x60)."""


@pytest.mark.parametrize("size", [pytest.param(size, id=f"{size[0]}x{size[1]}") for size in SIZES])
@pytest.mark.parametrize(
    "events",
    [
        pytest.param(sc.loading(), id="loading"),
        pytest.param(sc.ready_with_bench(), id="ready_bench"),
        pytest.param(sc.crashed(), id="crashed"),
    ],
)
def test_sizes(snap_compare: SnapCompare, events: list[Event], size: tuple[int, int]) -> None:
    assert snap_compare(app_for(events), terminal_size=size, run_before=settle_screen)


def pressing(*keys: str, focus_log: bool = False) -> Callable[[Pilot[None]], Awaitable[None]]:
    """A `run_before` that presses `keys` and lets the layout settle after each (a page switch moves focus)."""

    async def run(pilot: Pilot[None]) -> None:
        await settle_screen(pilot)
        if focus_log:
            pilot.app.screen.query_one(LogView).focus()
        for key in keys:
            await pilot.press(key)
            await settle_screen(pilot)

    return run


def test_sweep_page_at_80x24(snap_compare: SnapCompare) -> None:
    # Without the GPU panel, which docks on this page: squeezed to 4 rows, plotext places its y labels
    # differently from one process to the next (hash order), which a snapshot cannot hold still.
    events = [event for event in sc.ready_with_bench() if event is not sc.GPUS]
    assert snap_compare(app_for(events), terminal_size=(80, 24), run_before=pressing("v"))


def test_zoomed_log_wrapped_at_80x24(snap_compare: SnapCompare) -> None:
    run_before = pressing("z", "w", focus_log=True)
    assert snap_compare(app_for(sc.crashed()), terminal_size=(80, 24), run_before=run_before)


def test_sweep_page_with_slo_at_80x30(snap_compare: SnapCompare) -> None:
    # The SLO columns and the verdict under the SLO must fit 80 columns (GPUs left out as above; 30 rows, so
    # the charts have the rows to place their labels the same way in every process).
    events = [event for event in sc.ready_with_slo() if event is not sc.GPUS]
    assert snap_compare(app_for(events), terminal_size=(80, 30), run_before=pressing("v"))


def test_sweep_page_with_many_notes_at_80x24(snap_compare: SnapCompare) -> None:
    # More warnings than the page has rows for: the table, the first lines under it with a hint saying how
    # many more there are, and the charts with their 8 rows (GPUs left out as above).
    assert snap_compare(app_for(sc.ready_with_many_notes()), terminal_size=(80, 24), run_before=pressing("v"))
