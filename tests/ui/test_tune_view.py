"""The Tune view (`T`, and "Tune" in the command palette): the newest tune journal's policy and chart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.widgets import Static

from specdash.server.tune import Journal
from specdash.ui.app import SpecdashApp
from specdash.ui.screens.tune import TuneScreen
from tests.ui import scenarios as sc
from tests.ui.conftest import AppFactory

HEADER = {"type": "header", "version": 1, "name": "night", "host": "gpu1", "base_mode": "eagle3",
          "baseline_mode": "baseline", "space": "steps=1,3 topk=1,4 draft=4,8", "levels": [1, 2, 4, 8],
          "repeats": 1, "noise_floor": 0.02, "settings": ["s3-k4-d8", "s1-k1-d2"]}  # fmt: skip
LEVELS = {
    "baseline": {1: 70.0, 2: 129.0, 4: 225.0, 8: 357.0},
    "s3-k4-d8": {1: 91.0, 2: 140.0, 4: 195.0, 8: 240.0},
    "s1-k1-d2": {1: 62.0, 2: 110.0, 4: 180.0},
}


def write_journal(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    lines = [HEADER]
    for name, levels in LEVELS.items():
        lines.append({"type": "startup", "candidate": name, "repeat": 0, "seconds": 6.0})
        lines += [{"type": "level", "candidate": name, "repeat": 0, "c": c, "tok_s": v} for c, v in levels.items()]
    lines.append({"type": "crash", "candidate": "s1-k1-d2", "repeat": 0, "c": 8, "reason": "RuntimeError: boom"})
    (directory / "night.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def shown(app: SpecdashApp, selector: str) -> str:
    return str(app.screen.query_one(selector, Static).render())


async def open_tune(app: SpecdashApp, pilot: object) -> None:
    await pilot.press("T")  # type: ignore[attr-defined]
    for _ in range(500):  # the view is pushed by a thread worker: wait for it, boundedly
        if isinstance(app.screen, TuneScreen):
            break
        await pilot.pause(0.01)  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 45)])
async def test_tune_view_shows_the_policy(build: AppFactory, size: tuple[int, int]) -> None:
    write_journal(Journal.default_dir())
    app, _ = build(sc.loading())
    async with app.run_test(size=size) as pilot:
        await open_tune(app, pilot)
        assert isinstance(app.screen, TuneScreen)
        summary = shown(app, "#tune-summary")
        assert "eagle3 vs baseline on gpu1: 2 settings x 4 levels; 3 restarts of 3" in summary
        assert "speculation stops paying above C = 2" in summary
        policy = shown(app, "#tune-policy")
        assert "s3-k4-d8" in policy and "no speculation" in policy and "1.300x" in policy
        assert "speedup vs C" in shown(app, "#tune-chart")
        await pilot.press("escape")
        assert not isinstance(app.screen, TuneScreen)


async def test_tune_view_without_a_tune_says_how_to_run_one(build: AppFactory) -> None:
    app, _ = build(sc.loading())
    async with app.run_test(size=(100, 30)) as pilot:
        await open_tune(app, pilot)
        assert "No tune yet" in shown(app, "#tune-summary")


async def test_tune_is_in_the_command_palette(build: AppFactory) -> None:
    app, _ = build(sc.loading())
    async with app.run_test(size=(100, 30)):
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Tune" in titles
