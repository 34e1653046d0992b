"""Pilot tests: session events render, keys call the session (after confirmation where it matters)."""

from __future__ import annotations

import pytest
from textual import events
from textual.binding import Binding
from textual.widgets import Label, OptionList

from specdash.core.events import Notice, ServerStatus
from specdash.phases import Phase
from specdash.remote.events import Connected, Failed, Lost, Reconnecting
from specdash.remote.ssherror import SSHError, SSHErrorKind
from specdash.ui.app import APP_BINDINGS, SpecdashApp
from specdash.ui.screens.confirm import ConfirmScreen
from specdash.ui.screens.dashboard import DashboardScreen
from specdash.ui.widgets.header import StatusHeader
from specdash.ui.widgets.logview import LogView
from tests.support import scenarios as sc
from tests.support.eventually import eventually
from tests.support.log_batches import log_batch
from tests.support.notices import record_notices
from tests.support.settle import on_screen, settle
from tests.ui.conftest import AppFactory

SIZE = (120, 40)
ALL_BINDINGS = [b for b in DashboardScreen.BINDINGS if isinstance(b, Binding)] + APP_BINDINGS


def text(app: SpecdashApp, selector: str) -> str:
    return str(app.screen.query_one(selector, Label).render())


async def test_loading_shows_phase_shard_and_no_history(build: AppFactory) -> None:
    app, _ = build(sc.loading())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "LOADING WEIGHTS" in text(app, "#server-state")
        assert "shard 29/64" in text(app, "#phase")
        assert text(app, "#eta") == "elapsed 52s · ETA: no history yet"
        assert "pid 1234" in text(app, "#server-facts") and "port 30000" in text(app, "#server-facts")
        assert text(app, "#timeline") == "launching 2s › dist-init 8s"
        assert app.screen.query_one("#server").has_class("-starting")


async def test_capturing_shows_batch_sizes_and_eta(build: AppFactory) -> None:
    app, _ = build(sc.capturing())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "capturing CUDA graphs  batch sizes 12/36" in text(app, "#phase")
        assert text(app, "#eta") == "elapsed 2m 11s · ready in 2m 05s ± 20s, from 5 starts"
        assert app.screen.query_one("#gpus").display


async def test_status_change_updates_state_class_and_header(build: AppFactory) -> None:
    app, session = build(sc.loading())
    async with app.run_test(size=SIZE) as pilot:
        session.emit(sc.READY)
        await pilot.pause()
        assert app.screen.query_one("#server").has_class("-ready")
        assert not app.screen.query_one("#startup").display
        assert "up 1h 02m" in text(app, "#server-facts")
        assert text(app, "#server-state-badge") == "server: ready"


async def test_crash_line_shown_and_c_jumps_to_it(build: AppFactory) -> None:
    app, _ = build(sc.crashed())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert sc.CRASH_REASON in text(app, "#crash")
        view = app.screen.query_one(LogView)
        assert view.follow and view.marked is None
        await pilot.press("c")
        assert view.marked is not None and view.marked.text == sc.CRASH_REASON
        assert not view.follow


async def test_c_only_offered_after_a_crash(build: AppFactory) -> None:
    app, _ = build(sc.loading())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        keys = {b.binding.key for b in app.screen.active_bindings.values() if b.enabled}
        assert "c" not in keys and "s" not in keys and "x" in keys


async def test_log_strips_ansi_and_filters_errors(build: AppFactory) -> None:
    app, _ = build(sc.crashed())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        view = app.screen.query_one(LogView)
        assert all("\x1b" not in line.text for line in view.shown)
        total = len(view.shown)
        await pilot.press("e")
        assert view.errors_only and 0 < len(view.shown) < total
        assert any("WARNING" in line.text for line in view.shown)
        assert any(line.text == sc.CRASH_REASON for line in view.shown)
        assert not any("Init torch distributed" in line.text for line in view.shown)
        await pilot.press("e")
        assert len(view.shown) == total


async def test_search_next_previous(build: AppFactory) -> None:
    app, _ = build(sc.loading())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        view = app.screen.query_one(LogView)
        search = app.screen.query_one("#log-search")
        await pilot.press("slash")
        # `/` is a priority key: the prompt has the focus once the app has read it (before, under two CPU hogs
        # and six workers the first letter went to the log, ci26; test_keys_typed_in_one_burst... is that case).
        await eventually(lambda: app.screen.focused is search, timeout=30, what="the search prompt focused")
        await pilot.press(*"torch distributed", "enter")
        await eventually(lambda: view.needle, until=lambda n: n == "torch distributed", timeout=30, what="the search")
        newest = view.marked
        assert newest is not None and "TP1" in newest.text and not view.follow
        await pilot.press("N")
        tp0 = await eventually(lambda: view.marked, until=lambda m: m is not newest, timeout=30, what="N moved")
        assert tp0 is not None and "TP0" in tp0.text
        await pilot.press("n")
        await eventually(lambda: view.marked, until=lambda m: m is newest, timeout=30, what="n back to the newest")
        await pilot.press("f")
        await eventually(lambda: view.follow and view.marked is None, timeout=30, what="f follows again")


async def test_keys_typed_in_one_burst_after_the_slash_all_reach_the_search(build: AppFactory) -> None:
    """A fast typist (or a paste) sends `/` and the search's letters before the app has handled any of them:
    the prompt must have the focus when the next key is read, or the first letters go to the log (`t` would
    turn its timestamps off). The keys go to the driver at once, as a terminal delivers them."""
    app, _ = build(sc.loading())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        view = app.screen.query_one(LogView)
        assert app._driver is not None and view.timestamps
        driver = app._driver

        def burst(*keys: tuple[str, str]) -> None:
            for key, char in keys:
                event = events.Key(key, char)
                event.set_sender(app)
                driver.send_message(event)

        burst(("slash", "/"), *((c, c) for c in "torch"), ("enter", "\r"))
        await eventually(lambda: view.needle, until=lambda n: n == "torch", timeout=30, what="the search")
        assert view.timestamps, "a letter of the search went to the log"
        # In the prompt a `/` is a character, not a new search (the last search, prefilled and selected, is
        # replaced by what is typed).
        burst(("slash", "/"), ("slash", "/"), ("x", "x"), ("enter", "\r"))
        await eventually(lambda: view.needle, until=lambda n: n == "/x", timeout=30, what="a / in the search")


async def test_follow_keeps_the_tail_in_view_and_pause_holds_it(build: AppFactory) -> None:
    app, session = build(sc.loading())
    async with app.run_test(size=SIZE) as pilot:
        view = app.screen.query_one(LogView)
        session.emit(log_batch(tuple(f"line {i}" for i in range(500))))
        # The end is where it is once the layout after the batch has shown the scrollbar: how many refreshes
        # that takes depends on the machine's load, so wait for it with a deadline.
        await eventually(
            lambda: (view.scroll_offset.y, view.max_scroll_y),
            until=lambda at: at[0] == at[1] > 0,
            timeout=10,
            what="the log at its end",
        )
        await pilot.press("f")
        held = view.scroll_offset.y
        session.emit(log_batch(tuple(f"more {i}" for i in range(200))))
        await pilot.pause()
        assert not view.follow and view.scroll_offset.y == held


async def test_log_is_bounded_and_reset_clears(build: AppFactory) -> None:
    app, session = build(sc.loading())
    async with app.run_test(size=SIZE) as pilot:
        view = app.screen.query_one(LogView)
        for batch in range(5):
            session.emit(log_batch(tuple(f"b{batch} line {i}" for i in range(2500))))
        await pilot.pause()
        assert len(view.shown) == 5000 and view.shown[-1].text == "b4 line 2499"
        session.emit(log_batch(("new run",), reset=True))
        await pilot.pause()
        assert [line.text for line in view.shown] == ["new run"]


async def test_s_starts_the_selected_mode(build: AppFactory) -> None:
    app, session = build(sc.stopped())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2", "s")
        await settle(app)
        assert session.calls == [("start", ("eagle3",))]


async def test_m_with_live_server_asks_then_switches(build: AppFactory) -> None:
    app, session = build(sc.ready_with_bench()[:4])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("1", "m")
        await on_screen(app, ConfirmScreen)
        question = str(app.screen.query_one("#question", Label).render())
        assert question == "Stop eagle3 (pid 1234) on root@gpu-box and start baseline?"
        assert session.calls == []
        await pilot.press("y")
        await settle(app)
        assert session.calls == [("switch", ("baseline",))]


async def test_x_cancelled_does_nothing(build: AppFactory) -> None:
    app, session = build(sc.loading())
    async with app.run_test(size=SIZE) as pilot:
        session.sweeping = True
        await pilot.press("x")
        await on_screen(app, ConfirmScreen)
        question = str(app.screen.query_one("#question", Label).render())
        assert question == (
            "Stop eagle3 (pid 1234) on root@gpu-box? The running sweep will be cancelled; finished levels are kept."
        )
        await pilot.press("n")
        await pilot.press("x", "escape")
        await settle(app)
        assert session.calls == [] and not isinstance(app.screen, ConfirmScreen)


async def test_action_error_becomes_a_notification(build: AppFactory) -> None:
    app, session = build(sc.stopped())
    notices = record_notices(app)
    async with app.run_test(size=SIZE) as pilot:
        session.fail_with = sc.REFUSED
        await pilot.press("s")
        await settle(app)
        assert [(n.message, n.severity) for n in notices] == [(sc.REFUSED.message, "error")]


async def test_connection_lost_and_reconnecting_in_header(build: AppFactory) -> None:
    app, session = build(sc.stopped())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert text(app, "#connection") == "● connected"
        session.emit(Lost(sc.HOST, "Keepalive timeout"))
        await pilot.pause()
        assert text(app, "#connection") == "✖ lost: Keepalive timeout"
        assert app.screen.query_one("#connection").has_class("-lost")
        session.emit(Reconnecting(sc.HOST, 2, 4.0, "Connection refused"))
        await pilot.pause()
        assert text(app, "#connection") == "✖ lost · reconnecting in 4s (attempt 2)"
        app.screen.query_one(StatusHeader).now = sc.NOW + 2.5
        await pilot.pause()
        assert text(app, "#connection") == "✖ lost · reconnecting in 2s (attempt 2)"
        session.emit(Failed(sc.HOST, SSHError(SSHErrorKind.AUTH, "root@gpu-box refused every key we offered")))
        await pilot.pause()
        assert text(app, "#connection") == "✖ failed: root@gpu-box refused every key we offered"
        session.emit(Connected(sc.HOST, 2))
        await pilot.pause()
        assert text(app, "#connection") == "● connected"


async def test_keymap_override_applies(build: AppFactory) -> None:
    app, session = build(sc.stopped(), keymap={"start": "S", "help": "f1"})
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("s")
        await settle(app)
        assert session.calls == []
        await pilot.press("S")
        await settle(app)
        assert session.calls == [("start", ("baseline",))]
        sections = dict(app.help_sections())
        assert ("S", "Start") == sections["Server"][0][:2]
        await pilot.press("f1")
        assert type(app.screen).__name__ == "HelpScreen"


async def test_a_key_that_does_nothing_now_says_why(build: AppFactory) -> None:
    app, session = build(sc.stopped())
    notices = record_notices(app)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        expected = {
            "a": "An A/B needs two marked modes (space marks the highlighted one; 0 marked).",
            "x": "No server of ours is running: s starts the highlighted mode.",
            "b": "A sweep measures the live mode: start one (s).",
            "n": "No search yet: / searches the log.",
        }
        for key, why in expected.items():
            await pilot.press(key)
            await pilot.pause()
            assert why in [n.message for n in notices], (key, why)
        assert session.calls == []


async def test_help_lists_every_binding(build: AppFactory) -> None:
    app, _ = build(sc.stopped())
    async with app.run_test(size=(120, 60)) as pilot:
        await pilot.press("question_mark")
        assert type(app.screen).__name__ == "HelpScreen"
        await pilot.pause()  # the pushed screen laid out (a busy CPU can leave it unsized after the key alone)
        keys_widget = app.screen.query_one("#help-keys")
        shown = "\n".join(keys_widget.render_line(y).text for y in range(keys_widget.size.height))
        for _title, rows in app.help_sections():
            for keys, description, _detail in rows:
                assert keys in shown and description in shown
        described = {description for _title, rows in app.help_sections() for _keys, description, _detail in rows}
        for binding in ALL_BINDINGS:
            assert binding.description in described or (binding.id or "").startswith("select-mode-")
        assert "1-9" in shown and "ctrl+p" in shown
        assert "tab" in shown and "Next panel" in shown  # the key that reaches every panel is listed too
        footnote = app.screen.query_one("#help-footnote")
        assert "the server keeps running" in " ".join(footnote.render_line(y).text for y in range(footnote.size.height))
        await pilot.press("escape")
        assert app.screen is app.dashboard


def test_every_binding_has_an_id_and_tooltip() -> None:
    assert all(binding.id and binding.tooltip for binding in ALL_BINDINGS)
    assert len({binding.id for binding in ALL_BINDINGS}) == len(ALL_BINDINGS)


async def test_command_palette_offers_the_actions_that_apply(build: AppFactory) -> None:
    app, _ = build(sc.stopped())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        titles = {command.title for command in app.get_system_commands(app.screen)}
        # Each entry names its key; Textual's own duplicates of q, ? and z are gone (its Quit skipped the
        # question a running sweep asks).
        assert {"Start  s", "Search  /", "Errors  e", "Follow  f", "Help  ?", "Quit  q"} <= titles, titles
        assert not titles & {"Quit", "Keys", "Maximize", "Minimize", "Stop  x"}, titles
        assert "Theme" in titles and "Screenshot" in titles


@pytest.mark.parametrize("bell", [True, False])
async def test_notice_notifies_and_rings_the_bell(
    build: AppFactory, monkeypatch: pytest.MonkeyPatch, bell: bool
) -> None:
    app, session = build(sc.stopped(), bell=bell)
    rings: list[int] = []
    monkeypatch.setattr(app, "bell", lambda: rings.append(1))
    notices = record_notices(app)
    async with app.run_test(size=SIZE) as pilot:
        session.emit(Notice("eagle3 is ready (2m 31s)", bell=True))
        await pilot.pause()
        assert [n.message for n in notices] == ["eagle3 is ready (2m 31s)"]
        assert rings == ([1] if bell else [])


async def test_q_quits_and_closes_the_session_only(build: AppFactory) -> None:
    app, session = build(sc.ready_with_bench()[:4])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("q")
    assert session.calls == [("close", ())]
    assert app.return_code == 0


async def test_server_status_stopped_hides_stop_keys(build: AppFactory) -> None:
    app, session = build(sc.loading())
    async with app.run_test(size=SIZE) as pilot:
        session.emit(ServerStatus(Phase.STOPPED))
        await pilot.pause()
        keys = {b.binding.key for b in app.screen.active_bindings.values() if b.enabled}
        assert "x" not in keys and "r" not in keys and "s" in keys


async def test_session_failure_becomes_a_notification(build: AppFactory) -> None:
    app, session = build(sc.stopped())

    async def broken_run() -> None:
        raise sc.REFUSED

    session.run = broken_run  # type: ignore[method-assign]
    notices = record_notices(app)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.pause()
        assert [n.message for n in notices] == [sc.REFUSED.message]


async def test_unknown_theme_warns_and_keeps_default() -> None:
    from specdash.config import UIConfig
    from specdash.ui.app import make_app
    from tests.support.fake_session import FakeSession

    app = make_app(
        FakeSession(sc.stopped()), config_ui=UIConfig(theme="no-such-theme"), clock=lambda: sc.NOW, live=False
    )
    notices = record_notices(app)
    async with app.run_test(size=SIZE):
        # Said when the app mounts, which may end after the test's first turn on a loaded machine.
        notes = await eventually(lambda: [n.message for n in notices], timeout=30, what="the unknown-theme notice")
        assert app.theme == "textual-dark"
        assert "no-such-theme" in notes[0]


async def test_disconnected_greys_out_host_actions(build: AppFactory) -> None:
    app, session = build(sc.reconnecting())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.dashboard.check_action("stop", ()) is None
        assert app.dashboard.check_action("start", ()) is False
        assert app.dashboard.check_action("follow", ()) is True
        assert "(last known" in text(app, "#server-state")
        await pilot.press("x")
        assert app.screen is app.dashboard and session.calls == []


async def test_command_palette_runs_an_action(build: AppFactory) -> None:
    app, session = build(sc.ready_with_bench()[:4])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+p", *"Stop")
        for _ in range(20):
            await pilot.pause(0.05)
            if "Stop" in str(app.screen.query(OptionList).first().get_option_at_index(0).prompt):
                break
        await pilot.press("enter")
        await pilot.pause()
        await on_screen(app, ConfirmScreen)
        assert session.calls == []


async def test_scrolling_up_with_keys_pauses_follow(build: AppFactory) -> None:
    app, session = build(sc.loading())
    async with app.run_test(size=SIZE) as pilot:
        session.emit(log_batch(tuple(f"line {i}" for i in range(500))))
        view = app.screen.query_one(LogView)
        await eventually(
            lambda: (view.scroll_offset.y, view.max_scroll_y),
            until=lambda at: at[0] == at[1] > 0,
            timeout=10,
            what="the log at its end",
        )
        view.focus()
        await pilot.press("pageup")
        assert not view.follow
        held = view.scroll_offset.y
        session.emit(log_batch(("one more",)))
        await pilot.pause()
        assert view.scroll_offset.y == held


async def test_stopped_says_so_without_a_startup_bar(build: AppFactory) -> None:
    app, _ = build(sc.stopped())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert text(app, "#server-state") == "○ STOPPED"
        assert text(app, "#server-facts") == "no server of ours on this host"
        assert not app.screen.query_one("#startup").display
        assert not app.screen.query_one("#crash").display


async def test_scrolling_back_to_the_end_resumes_follow(build: AppFactory) -> None:
    app, session = build(sc.loading())
    async with app.run_test(size=SIZE) as pilot:
        session.emit(log_batch(tuple(f"line {i}" for i in range(500))))
        view = app.screen.query_one(LogView)
        await eventually(
            lambda: (view.scroll_offset.y, view.max_scroll_y),
            until=lambda at: at[0] == at[1] > 0,
            timeout=10,
            what="the log at its end",
        )
        view.focus()
        await pilot.press("pageup")
        assert not view.follow
        await pilot.press("pagedown")  # one page down is the end again
        assert view.follow
        await pilot.press("pageup", "pageup")
        await pilot.press("end")
        assert view.follow
        session.emit(log_batch(("newest",)))
        await pilot.pause()
        assert view.scroll_offset.y == view.max_scroll_y and view.shown[-1].text == "newest"


async def test_a_line_without_a_break_is_cut_in_view(build: AppFactory) -> None:
    app, session = build(sc.loading())
    async with app.run_test(size=SIZE) as pilot:
        session.emit(log_batch(("x" * 262_144, "short")))
        await pilot.pause()
        view = app.screen.query_one(LogView)
        long = view.shown[-2].text
        assert long.startswith("x" * 4096) and len(long) < 4200
        assert "258,048 more characters in the log on the host" in long
        assert view.shown[-1].text == "short"


async def test_a_busy_port_held_by_a_hand_started_server_offers_adoption(build: AppFactory) -> None:
    from specdash.server.adopt import Adoptable, Found
    from specdash.server.lifecycle import PortBusy

    app, session = build(sc.stopped())
    argv = ("python3", "-m", "sglang.launch_server", "--model-path", "/m", "--port", "30000")
    found = Found(4242, 4242, 4242, 0.0, argv, "/srv", "/srv/s.log", "/srv/s.log", True)
    session.adoptable = Adoptable(found, "sglang", "baseline", True, {}, 30000, "/srv/s.log", "stdout")
    async with app.run_test(size=SIZE) as pilot:
        session.fail_with = PortBusy(
            "root@gpu-box", 30000, 'LISTEN 0 128 127.0.0.1:30000 users:(("python3",pid=4242,fd=3))'
        )
        await pilot.press("s")
        await settle(app)
        for _ in range(40):
            if isinstance(app.screen, ConfirmScreen):
                break
            await pilot.pause(0.05)
        await on_screen(app, ConfirmScreen)
        question = str(app.screen.query_one("#question", Label).render())
        assert "held by a server specdash did not start" in question
        assert "pid 4242 (process group 4242): python3 -m sglang.launch_server --model-path /m --port 30000" in question
        assert "log: /srv/s.log (from stdout)" in question
        await pilot.press("y")
        await settle(app)
        assert [c[0] for c in session.calls] == ["start", "find_adoptable", "adopt"]
        assert session.calls[-1] == ("adopt", (4242,))


async def test_mode_list_marker_follows_the_server_state(build: AppFactory) -> None:
    from specdash.phases import CrashInfo
    from specdash.ui.widgets.modes import ModeList

    app, session = build(sc.ready_with_bench()[:4])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()

        def prompts() -> list[str]:
            return [str(o.prompt) for o in app.screen.query_one(ModeList)._options]

        assert any("eagle3" in p and "● ready" in p for p in prompts())
        session.emit(ServerStatus(Phase.CRASHED, mode="eagle3", pid=1234, crash=CrashInfo("RuntimeError: x")))
        await pilot.pause()
        assert any("eagle3" in p and "✖ crashed" in p for p in prompts())
        assert not any("running" in p for p in prompts())
        assert "CRASHED" in text(app, "#server-state")


async def test_after_a_crash_x_offers_to_clean_up_what_is_left_in_the_group(build: AppFactory) -> None:
    from specdash.phases import CrashInfo

    app, session = build(sc.stopped())
    async with app.run_test(size=SIZE) as pilot:
        crashed = ServerStatus(Phase.CRASHED, mode="eagle3", pid=1234, crash=CrashInfo("EngineDeadError"))
        session.emit(crashed)
        await pilot.pause()
        assert app.dashboard.check_action("stop", ()) is False  # nothing left: nothing to clean up
        session.emit(ServerStatus(**{**crashed.__dict__, "leftovers": ("1240 VLLM::Worker_TP0",)}))
        await pilot.pause()
        assert "1 process(es) of its group still alive" in text(app, "#crash")
        await pilot.press("x")
        await on_screen(app, ConfirmScreen)
        question = str(app.screen.query_one("#question", Label).render())
        assert "1240 VLLM::Worker_TP0" in question and "Kill them" in question
        await pilot.press("y")
        await settle(app)
        assert session.calls == [("stop", ())]
