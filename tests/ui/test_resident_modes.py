"""The mode list shows each resident mode's server: awake, asleep with the GiB it still holds, waking,
verifying; a mode that is not resident shows none of it."""

from __future__ import annotations

from specdash.core.events import ModeInfo, ModesChanged
from specdash.ui.widgets.modes import ModeList
from tests.support import scenarios as sc
from tests.ui.conftest import AppFactory


async def test_the_mode_list_shows_each_resident_server_state(build: AppFactory) -> None:
    app, session = build(sc.stopped())
    async with app.run_test(size=(100, 30)) as pilot:

        def prompts() -> dict[str, str]:
            options = app.screen.query_one(ModeList)._options
            return {str(o.prompt).split()[1]: str(o.prompt) for o in options}

        modes = (
            ModeInfo("baseline", "sglang", "no speculation"),
            ModeInfo("r-base", "sglang", "resident", resident="asleep (1.1 GiB held)"),
            ModeInfo("r-eagle3", "sglang", "resident", resident="awake"),
        )
        session.emit(ModesChanged(modes, current="r-eagle3"))
        await pilot.pause()
        shown = prompts()
        assert "r-base asleep (1.1 GiB held)  sglang" in shown["r-base"]
        assert "r-eagle3 awake  sglang" in shown["r-eagle3"]
        assert "asleep" not in shown["baseline"] and "awake" not in shown["baseline"]
        session.emit(ModesChanged((*modes[:1], ModeInfo("r-base", "sglang", "", resident="verifying"), modes[2])))
        await pilot.pause()
        assert "r-base verifying" in prompts()["r-base"]
