"""Pilot tests of the layout by terminal size, the keys people know (j/k/g/G, w, t, z, v), folded progress
bars, and quitting while a sweep runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import OptionList
from textual.widgets._toast import Toast, ToastRack

from specdash.ui.screens.confirm import ConfirmScreen
from specdash.ui.widgets.bench import BenchTable
from specdash.ui.widgets.logpanel import LogPanel
from specdash.ui.widgets.logview import LogView
from tests.support import scenarios as sc
from tests.support.eventually import eventually
from tests.support.log_batches import log_batch
from tests.support.settle import on_screen, settle_screen
from tests.ui.conftest import AppFactory

LONG = "[2025-04-16 14:24:02 TP0] Decode batch. #running-req: 10, #token: 5120, gen throughput (token/s): 1714.22"


@pytest.mark.parametrize(
    ("size", "paged", "width_class", "log_width"),
    [
        ((80, 24), True, "-narrow", 70),  # a whole message after the timestamp
        ((100, 30), True, "-medium", 98),  # the whole terminal, less the border
        ((120, 40), False, "-medium", 118),
        ((160, 45), False, "-wide", len(LONG)),  # beside the side column, the whole line
    ],
)
async def test_layout_follows_the_terminal_size(
    build: AppFactory, size: tuple[int, int], paged: bool, width_class: str, log_width: int
) -> None:
    app, session = build(sc.ready_with_bench())
    async with app.run_test(size=size) as pilot:
        session.emit(log_batch((LONG,)))
        await pilot.pause()
        screen = app.screen
        assert screen.has_class(width_class)
        assert screen.query_one("#pages").display is paged
        assert screen.query_one("#bench").display is not paged  # paged: the server page comes first
        view = screen.query_one(LogView)
        assert view.scrollable_content_region.width >= log_width, view.size
        keys = {b.binding.key for b in screen.active_bindings.values() if b.enabled}
        assert ("v" in keys) is paged


async def test_v_switches_pages_and_a_sweep_brings_its_page(build: AppFactory) -> None:
    app, session = build(sc.ready_with_bench())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        await pilot.press("v")
        assert screen.query_one("#bench").display and not screen.query_one("#main").display
        assert isinstance(screen.focused, BenchTable)  # keys act on what is in view
        assert screen.query_one("#gpus-bench").display and not screen.query_one("#gpus").display
        await pilot.press("v")
        assert screen.query_one("#main").display and not screen.query_one("#bench").display
        await pilot.press("b")  # sweep: levels dialog, enter accepts the defaults
        await pilot.press("enter")
        await pilot.pause()
        assert app.dashboard.page == "bench" and screen.query_one("#bench").display
        assert session.calls[-1][0] == "sweep"


async def test_z_zooms_the_focused_panel_and_esc_or_z_brings_it_back(build: AppFactory) -> None:
    app, _ = build(sc.ready_with_bench())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        screen.query_one(LogView).focus()
        await pilot.press("z")
        log = screen.query_one(LogPanel)
        assert screen.maximized is log and log.outer_size == (80, 22)  # all but the header and the footer
        await pilot.press("escape")
        assert screen.maximized is None
        screen.set_focus(None)
        await pilot.press("z")  # nothing focused: the log
        assert screen.maximized is log
        await pilot.press("z")
        assert screen.maximized is None


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 45)])
@pytest.mark.parametrize(
    ("focus", "keys"),
    [
        ("#pages", ()),  # the page tabs: not a panel (hidden from 100x30 up)
        ("#bench-lines", ()),  # the lines under the sweep table: on the other page when paged
        (None, ("r", "e", "enter")),  # after a search
    ],
)
async def test_z_never_zooms_to_a_blank_screen(
    build: AppFactory, size: tuple[int, int], focus: str | None, keys: tuple[str, ...]
) -> None:
    app, session = build(sc.ready_with_bench())
    async with app.run_test(size=size) as pilot:
        session.emit(log_batch(tuple(f"line {i} ready" for i in range(50))))
        await pilot.pause()
        screen = app.screen
        if focus is not None:
            screen.query_one(focus).focus()
        if keys:
            await pilot.press("slash")
            search = screen.query_one("#log-search")  # the search prompt takes the keys once it has the focus
            await eventually(lambda: screen.focused is search, timeout=30, what="the search prompt focused")
        await pilot.press(*keys, "z")
        await pilot.pause()
        zoomed = screen.maximized
        assert zoomed is not None and zoomed.region.area > 0, (zoomed, zoomed and zoomed.region)
        assert zoomed.id in ("log", "bench", "modes", "server", "gpus"), zoomed  # a panel, not the tab bar
        assert zoomed.region.height >= size[1] - 2  # the whole screen less header and footer


async def test_j_k_g_G_move_the_focused_list_or_the_log(build: AppFactory) -> None:
    app, session = build(sc.stopped())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        modes = app.screen.query_one(OptionList)
        assert app.screen.focused is modes and modes.highlighted == 0
        # Each key's effect is waited for: a key is handled once the app has read it, which under load can be after
        # `pilot.press` returns (ci31, six workers and two CPU hogs).

        async def moves_to(row: int, *keys: str) -> None:
            await pilot.press(*keys)
            await eventually(lambda: modes.highlighted == row, timeout=30, what=f"{''.join(keys)}: row {row}")

        await moves_to(2, "j", "j")
        await moves_to(1, "k")
        await moves_to(0, "g")
        await moves_to(2, "G")
        session.emit(log_batch(tuple(f"line {i}" for i in range(300))))
        view = app.screen.query_one(LogView)
        await eventually(lambda: len(view.shown), until=lambda n: n >= 300, timeout=30, what="300 lines")
        app.screen.set_focus(view)  # now: `Widget.focus` would move it on a later turn
        await pilot.press("g")
        await eventually(
            lambda: (view.scroll_offset.y, view.follow), until=lambda v: v == (0, False), timeout=30, what="g"
        )
        await pilot.press("j")
        await eventually(lambda: view.scroll_target_y, until=lambda y: y == 1, timeout=30, what="j")
        await pilot.press("G")
        await eventually(lambda: view.follow, timeout=30, what="G follows")


async def test_w_wraps_long_lines_and_t_hides_timestamps(build: AppFactory) -> None:
    app, session = build(sc.stopped())
    async with app.run_test(size=(80, 24)) as pilot:
        session.emit(log_batch((LONG, "short")))
        await pilot.pause()
        view = app.screen.query_one(LogView)
        width = view.scrollable_content_region.width
        await pilot.press("w")
        assert view.wrap
        rows = -(-len(LONG) // width)
        assert view.virtual_size.height == rows + 1
        shown = "".join(view.render_line(y).text for y in range(rows)).rstrip()
        assert LONG in shown.replace("\n", "")  # every character is on screen, none scrolled away
        await pilot.press("t")
        assert not view.timestamps
        assert view.render_line(0).text.startswith("[TP0] Decode batch.")
        assert "no times" in str(app.screen.query_one(LogPanel).border_subtitle)
        await pilot.press("t", "w")
        assert view.timestamps and not view.wrap and view.virtual_size.height == 2


async def test_progress_bar_redraws_fold_into_one_updating_line(build: AppFactory) -> None:
    app, session = build(sc.stopped())
    async with app.run_test(size=(120, 40)) as pilot:
        shards = [
            f"Loading safetensors checkpoint shards: {i * 100 // 4:3d}% Completed | {i}/4 [00:0{i}<00:01]"
            for i in range(5)
        ]
        session.emit(log_batch(("[2025-04-16 14:21:49 TP0] Load weight begin.", *shards[:3])))
        session.emit(log_batch((*shards[3:], "[2025-04-16 14:21:55 TP0] Load weight end.")))
        # The draft model's shards: the same description counting from 0 again is a new bar.
        session.emit(log_batch(("Loading safetensors checkpoint shards:   0% Completed | 0/1 [00:00<?]",)))
        await pilot.pause()
        view = app.screen.query_one(LogView)
        assert [line.text for line in view.shown] == [
            "[2025-04-16 14:21:49 TP0] Load weight begin.",
            shards[4],  # the bar's last state, where the bar started
            "[2025-04-16 14:21:55 TP0] Load weight end.",
            "Loading safetensors checkpoint shards:   0% Completed | 0/1 [00:00<?]",
        ]
        assert view.folded == 4
        assert "4 bar redraws folded" in str(app.screen.query_one(LogPanel).border_subtitle)


async def test_a_vllm_bar_keeps_its_process_tag_and_no_line_is_a_bare_tag(build: AppFactory) -> None:
    """vLLM tags each write of its engine process and tqdm starts its write with a `\\r`, so the stream splits
    into a bare `(EngineCore pid=N) ` line and the bar: the view shows one line, the tag in front of the bar
    (the real H100 log's shard bar, as the log follower splits it); the tagged empty write after the bar
    (tqdm's closing newline) is not shown."""
    from specdash.core.lines import split_lines
    from tests.support.log_batches import RawLog

    tag = "(EngineCore pid=3343) "
    raw = (
        f"{tag}INFO 12-06 08:40:21 [default_loader.py:291] Loading weights\n"
        + "".join(
            f"{tag}\rLoading safetensors checkpoint shards: {p:3d}% Completed | {n}/4 [00:00<00:00, 17.41it/s]\n"
            for p, n in ((0, 0), (50, 2), (100, 4))
        )
        + f"{tag}\n"  # tqdm's closing newline, tagged: an empty write
        + f"{tag}INFO 12-06 08:40:22 [default_loader.py:430] Loading weights took 0.23 seconds\n"
    )
    log = RawLog()
    lines = split_lines(raw)
    app, session = build(sc.stopped())
    async with app.run_test(size=(120, 40)) as pilot:
        session.emit(log.batch(lines[:4]))  # a batch that ends on a bare tag: it waits for what follows
        session.emit(log.batch(lines[4:]))
        await pilot.pause()
        view = app.screen.query_one(LogView)
        shown = [line.text for line in view.shown]
        assert view.folded == 3  # two redraws and the empty write
    assert shown == [
        f"{tag}INFO 12-06 08:40:21 [default_loader.py:291] Loading weights",
        f"{tag}Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:00<00:00, 17.41it/s]",
        f"{tag}INFO 12-06 08:40:22 [default_loader.py:430] Loading weights took 0.23 seconds",
    ]


async def test_the_demos_quit_question_says_its_server_stops_with_it() -> None:
    """The demo stops its simulated server when it quits: its question must not send the user to
    `specdash down demo` (which cannot resolve the demo's host)."""
    from specdash.config import UIConfig
    from specdash.ui.app import make_app
    from tests.support.fake_session import FakeSession

    session = FakeSession(sc.ready_with_bench(), label="demo")
    app = make_app(session, config_ui=UIConfig(), clock=lambda: sc.NOW, live=False, quit_stops_server=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        session.sweeping = True
        await pilot.press("q")
        await pilot.pause()
        question = str(app.screen.query_one("#question").render())
        assert "eagle3 (pid 1234) on demo stops with it (nothing keeps running)" in question, question
        assert "specdash down" not in question


async def test_q_during_a_sweep_says_what_stops_and_waits_for_yes(build: AppFactory) -> None:
    app, session = build(sc.ready_with_bench())
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        session.sweeping = True
        await pilot.press("q")
        await pilot.pause()
        await on_screen(app, ConfirmScreen)
        question = str(app.screen.query_one("#question").render())
        assert "The running A/B (baseline vs eagle3) stops, 1 of 6 levels unrun" in question
        assert "its 5 finished levels and every completed request are kept" in question
        assert "eagle3 (pid 1234) on root@gpu-box keeps running (specdash down root@gpu-box stops it)" in question
        await pilot.press("n")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen) and ("close", ()) not in session.calls
        await pilot.press("q")
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
    assert ("close", ()) in session.calls


async def test_a_question_is_never_covered_by_a_toast(build: AppFactory) -> None:
    """At 80x24 a long notice (the startup advice) lay over the quit question and hid it (e2e, 2 runs in 5)."""
    app, session = build(sc.ready_with_bench())
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await pilot.pause()
        app.notify("startup advice: " + "capture fewer CUDA graphs " * 20, timeout=30)
        await pilot.pause()
        assert [t for t in app.screen.query(Toast) if t.display], "the notice is on screen before the question"
        session.sweeping = True
        await pilot.press("q")
        await pilot.pause()
        await on_screen(app, ConfirmScreen)
        app.notify("a notice that comes while the question is up " * 5, timeout=30)
        await pilot.pause()
        racks = [r for r in app.screen.query(ToastRack) if r.display]
        assert not [t for r in racks for t in r.query(Toast)], "a toast covers the question"
        await pilot.press("n")
        await pilot.pause()
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        shown = [str(t.render()) for t in app.screen.query(Toast)]
        assert any("while the question is up" in t for t in shown), shown  # held, not lost


async def test_exit_summary_says_what_still_runs(build: AppFactory) -> None:
    app, session = build(sc.ready_with_bench()[:4])
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("q")
    summary = app.exit_summary()
    assert summary is not None
    assert "eagle3 (pid 1234) is still running on root@gpu-box, port 30000 (ready)" in summary
    assert "specdash down root@gpu-box" in summary
    stopped, _ = build(sc.stopped())
    async with stopped.run_test(size=(100, 30)) as pilot:
        await pilot.press("q")
    assert stopped.exit_summary() is None


async def test_screenshot_goes_to_a_directory_that_exists(
    build: AppFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    app, _ = build(sc.stopped())
    async with app.run_test(size=(100, 30)) as pilot:
        app.deliver_screenshot(path=str(tmp_path / "new" / "dir"), filename="shot.svg")
        await pilot.pause()
        await pilot.pause()
    assert (tmp_path / "new" / "dir" / "shot.svg").read_text().startswith("<svg")


async def test_new_keys_are_in_help_and_remappable(build: AppFactory) -> None:
    app, _ = build(sc.ready_with_bench(), keymap={"zoom": "Z", "wrap": "W"})
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        rows = {description: keys for _title, section in app.help_sections() for keys, description, _ in section}
        assert rows["Zoom"] == "Z" and rows["Wrap"] == "W" and rows["Down"] == "j" and rows["Times"] == "t"
        assert rows["Page"] == "v" and rows["Top"] == "g" and rows["Bottom"] == "G"
        view = app.screen.query_one(LogView)
        await pilot.press("W")
        assert view.wrap
        view.focus()
        await pilot.press("Z")
        assert app.screen.maximized is not None
        await pilot.press("Z")
        await pilot.press("enter")  # enter in the log zooms it too
        assert app.screen.maximized is app.screen.query_one(LogPanel)


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 45)])
async def test_the_server_panel_keeps_its_height_while_its_clock_ticks(
    build: AppFactory, size: tuple[int, int]
) -> None:
    """The lines that change every second (uptime, time in phase, elapsed and ETA) never re-wrap: the panel
    does not change height, so the log under it does not jump."""
    from dataclasses import replace

    from specdash.ui.widgets.server import ServerPanel

    starting = replace(sc.CAPTURING, eta_remaining=3725.0, eta_spread=1234.0, eta_samples=12)
    app, _ = build([sc.MODES, starting])
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        panel = app.screen.query_one(ServerPanel)
        heights = set()
        for elapsed in (5, 59, 61, 599, 3599, 3601, 86_399, 200_000):
            panel.now = starting.started_at + elapsed  # type: ignore[operator]
            await pilot.pause()
            heights.add(panel.outer_size.height)
        assert len(heights) == 1, heights


@pytest.mark.parametrize("width", [66, 68, 70, 72, 80])
async def test_a_key_group_never_loses_its_label_to_the_pinned_keys(build: AppFactory, width: int) -> None:
    """Where the pinned `? Help q Quit` cover a group's label ("jk Move"), the group's keys go with it: never a
    bare "jk" (or "j") before "? Help"."""
    from textual.widgets._footer import FooterLabel, KeyGroup

    from specdash.ui.widgets.footer import PinnedFooter

    app, _ = build(sc.ready_with_bench())
    async with app.run_test(size=(width, 24)) as pilot:
        await pilot.pause()
        await pilot.pause()
        row = [c for c in app.screen.query_one(PinnedFooter).children if not c.has_class("footer-pinned")]
        for i, child in enumerate(row):
            if isinstance(child, KeyGroup) and child.display:
                label = row[i + 1]
                assert isinstance(label, FooterLabel) and label.display, (width, [c.display for c in row])


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 45)])
async def test_help_quit_and_the_running_modes_state_stay_in_view(build: AppFactory, size: tuple[int, int]) -> None:
    """With a server running (the most keys apply) the footer still shows `? Help` and `q Quit`, and the mode
    list shows the running mode's state whole (it was cut to "● rea…" at 80 columns and lost at 100)."""
    from textual.widgets._footer import FooterKey, FooterLabel

    from specdash.ui.widgets.modes import ModeList

    app, _ = build(sc.ready_with_bench())
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await pilot.pause()
        keys = {key.action: key for key in app.screen.query(FooterKey)}
        for action in ("help", "quit"):
            region = keys[action].region
            assert region.area > 0 and region.right <= size[0], (action, region)
        # No key of the row runs under the pinned ones ("v? Help" at 80): it is shown whole or not at all.
        edge = app.screen.query_one(".footer-pinned").region.x
        row = [k for k in app.screen.query(FooterKey) if not k.ancestors_with_self[1].has_class("footer-pinned")]
        row = [k for k in row if k.region.area]
        limit = edge - 1 if size[0] <= 80 else edge  # compact at 80 columns: one blank cell before the pinned keys
        assert all(k.region.right <= limit for k in row), [(k.action, k.region) for k in row if k.region.right > limit]
        # A key group's label ("jk Move") and the key after it keep a cell between them ("Movez Zoom" at 80).
        cells = [key.region for key in app.screen.query(FooterKey) if key.region.area]
        for label in app.screen.query(FooterLabel):
            after = [r.x for r in cells if r.x >= label.region.right and r.y == label.region.y]
            assert not after or min(after) > label.region.right, (str(label.render()), label.region, after)
        modes = app.screen.query_one(ModeList)
        prompt = str(modes.get_option_at_index(1).prompt)
        end = prompt.index("● ready") + len("● ready")
        assert end <= modes.scrollable_content_region.width, (prompt, modes.scrollable_content_region)


async def test_the_footer_rebuilds_its_keys_only_when_they_change(build: AppFactory) -> None:
    """A bindings change that shows the same keys keeps the footer's key widgets (Textual's `Footer` built them all
    again each time: nine rebuilds in ten changed nothing, a quarter of a UI test's CPU), and one that changes
    them (the search prompt opens, only its `esc` applies) shows the new keys."""
    from textual.widgets._footer import FooterKey

    from specdash.ui.widgets.footer import PinnedFooter

    app, _ = build(sc.ready_with_bench())
    async with app.run_test(size=(160, 45)) as pilot:
        footer = app.screen.query_one(PinnedFooter)
        await eventually(lambda: list(footer.query(FooterKey)), timeout=30, what="the footer's keys")
        await settle_screen(pilot)  # the mount's own bindings changes (the focus) are handled
        await footer.recompose()  # up to date: a rebuild only if those changed the keys after the last one
        keys = list(footer.query(FooterKey))
        await footer.recompose()
        assert list(footer.query(FooterKey)) == keys  # the same widgets, not new ones showing the same
        assert all(key.is_attached for key in keys)
        await pilot.press("slash")
        shown = await eventually(
            lambda: [
                key.action for key in footer.query(FooterKey) if key.action not in ("help", "quit", "command_palette")
            ],
            timeout=30,
            what="the search prompt's keys",
            until=lambda actions: actions == ["close"],
        )
        assert shown == ["close"]
