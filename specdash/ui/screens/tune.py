"""The `T` screen: start a speculation tune of the config's `[tune.NAME]` entries and watch it live.

When no tune runs: the entries (`n` picks the next, `s` starts the picked one after a confirmation that says
how many restarts it makes at most and how long it should take, `core.eta.tune_estimate`), and the newest
stored tune's policy as `specdash tune` printed it.
While one runs (`RemoteSession.tune`, reported as `TuneProgress`): the confirmation's expected time counted
down on the view's title (`overdue by ...` once it has run out), the setting being measured, its levels
done, restarts used of the full grid, settings dropped, the whole tune's ETA, and the policy table and
speedup-vs-C chart (with the 1.0 line) filling in as levels finish; `c` cancels (finished levels are kept
and `specdash tune HOST --tune NAME --resume` goes on).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from specdash.core.eta import SweepEstimate
from specdash.core.events import TuneEntry, TuneProgress
from specdash.tune.report import policy_line, policy_rows, speedup_chart
from specdash.ui.messages import TuneUpdated

NO_TUNE = (
    "No tune yet. Add a [tune.NAME] entry to the config to start one here, or run one, e.g.\n"
    "  specdash tune HOST --mode eagle3 --space 'steps=1,2,3,5 topk=1,4 draft=4,8,16'\n"
    "or offline: specdash tune demo --mode eagle3 --space 'steps=1,3 topk=1,4 draft=4,8'"
)


class TuneScreen(ModalScreen[None]):
    """One tune: the live one started here, else the newest journal's (`None`: none yet)."""

    BINDINGS = [
        Binding("escape,T,q", "dismiss", "Close", id="tune-close", tooltip="Close the tune view"),
        Binding("s", "start", "Start tune", id="tune-start", tooltip="Start the picked [tune.NAME] entry"),
        Binding("n", "next_entry", "Next entry", id="tune-next", tooltip="Pick the next [tune.NAME] entry"),
        Binding("c", "cancel", "Cancel tune", id="tune-cancel", tooltip="Stop the tune; finished levels are kept"),
    ]

    def __init__(
        self,
        report: Mapping[str, Any] | None,
        entries: Sequence[TuneEntry] = (),
        progress: TuneProgress | None = None,
        start: Callable[[str, SweepEstimate | None], None] | None = None,
        estimate: Callable[[TuneEntry], SweepEstimate] | None = None,
        countdown: Callable[[], str] = str,
        tick: float | None = None,
    ) -> None:
        """Args:
        report: the newest journal's report (shown when no tune started here).
        entries: the config's `[tune.NAME]` entries.
        progress: the last step of the tune started here, if any.
        start: starts the named entry, with the estimate its confirmation gave.
        estimate: how long an entry should take (`Tunes.estimate`); None: not said.
        countdown: the running tune's expected time left, in words; "" when none is counted.
        tick: seconds between redraws of the countdown; None: no timer (tests call `_tick`).
        """
        super().__init__()
        self._report = progress.report if progress is not None else report
        self._entries = tuple(entries)
        self._progress = progress
        self._start = start
        self._estimate = estimate
        self._countdown = countdown
        self._tick_s = tick
        self._picked = next((i for i, e in enumerate(self._entries) if not e.problem), 0)

    @property
    def running(self) -> bool:
        """True while the tune shown is running."""
        return self._progress is not None and self._progress.phase == "running"

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="tune-dialog"):
            yield Static(id="tune-live")
            yield Static(id="tune-summary")
            yield Static(id="tune-policy")
            yield Static(id="tune-chart")

    def on_mount(self) -> None:
        self._show()
        if self._tick_s:
            self.set_interval(self._tick_s, self._tick)

    def _tick(self) -> None:
        """The countdown moves once a second on the title."""
        self.query_one("#tune-dialog").border_title = self._title()

    def _title(self) -> str:
        name = str(self._report["name"]) if self._report else ""
        left = self._countdown() if self.running else ""
        return " · ".join(x for x in (f"Tune {name}".strip(), left) if x)

    def on_tune_updated(self, message: TuneUpdated) -> None:
        self._progress = message.progress
        self._report = message.progress.report
        self._show()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "start":
            return not self.running and any(not e.problem for e in self._entries)
        if action == "next_entry":
            return not self.running and len(self._entries) > 1
        if action == "cancel":
            return self.running
        return True

    def _show(self) -> None:
        dialog = self.query_one("#tune-dialog")
        dialog.border_title = self._title()
        keys = ["c: cancel"] if self.running else (["s: start"] if self.check_action("start", ()) else [])
        if not self.running and len(self._entries) > 1:
            keys.append("n: next entry")
        dialog.border_subtitle = "  ".join([*keys, "esc: close"])
        self.query_one("#tune-live", Static).update(self._live())
        report = self._report
        # The table and the chart are the policy: nothing to show before a speculative setting has a level (a
        # "no speculation, 1.000x" row and a flat line would be a verdict on nothing).
        measured = bool(report and report.get("measured") and report.get("speculative_measured", True))
        self.query_one("#tune-summary", Static).update(self._summary() if report else Text(NO_TUNE))
        self.query_one("#tune-policy", Static).update(self._table() if measured else "")
        self.query_one("#tune-chart", Static).update(Text(self._chart()) if measured else "")
        self.refresh_bindings()

    # -- the live lines, or the entries to start -----------------------------------------------------

    def _live(self) -> Text:
        p = self._progress
        if p is None or p.phase != "running":
            ended = self._ended(p)
            return Text("\n".join([*ended, *([""] if ended else []), *self._entry_lines()]))
        measuring = (
            f"measuring {p.setting} (pass {p.repeat + 1}/{p.repeats}): levels {p.levels_done}/{p.levels_total} done"
            if p.setting
            else "between restarts"
        )
        eta = (
            f"{p.eta_restarts} restarts left; the time left (on the title) is re-estimated from what is measured"
            if p.eta_s is not None
            else "the tune's own estimate comes after its first restart (the title counts the confirmation's)"
        )
        lines = [
            f"tune {p.name} running: {measuring}",
            f"restarts {p.restarts} of {p.full_grid_restarts} (full grid); "
            f"dropped: {', '.join(p.dropped) if p.dropped else 'none yet'}",
            eta,
            f"last: {p.line}",
            f"c cancels (finished levels are kept; {p.resume} continues)",
        ]
        text = Text("\n".join(lines))
        text.stylize("bold", 0, len(lines[0]))
        return text

    @staticmethod
    def _ended(p: TuneProgress | None) -> list[str]:
        if p is None:
            return []
        if p.phase == "cancelled":
            return [
                f"tune {p.name} cancelled: {p.after or 'nothing new started'}",
                f"finished levels are kept; {p.resume} continues",
            ]
        if p.phase == "failed":
            return [f"tune {p.name} {p.line}", f"{p.resume} continues"]
        return [f"tune {p.name} {p.line}"]

    def _entry_lines(self) -> list[str]:
        if not self._entries:
            return ["No [tune.NAME] entry in the config: add one to start a tune from here."]
        lines = ["[tune.NAME] entries (s starts the picked one):"]
        for i, e in enumerate(self._entries):
            mark = ">" if i == self._picked else " "
            if e.problem:
                lines.append(f"{mark} {e.name}: cannot run: {e.problem}")
            else:
                lines.append(
                    f"{mark} {e.name}: {e.mode} vs {e.baseline}, {e.settings} settings x {len(e.levels)} levels, "
                    f"{e.repeats} passes: at most {e.max_restarts} restarts"
                )
        return lines

    # -- keys ------------------------------------------------------------------------------------------

    def action_next_entry(self) -> None:
        if self._entries:
            self._picked = (self._picked + 1) % len(self._entries)
            self._show()

    def action_start(self) -> None:
        from specdash.ui.screens.confirm import ConfirmScreen

        if not self.check_action("start", ()) or self._start is None:
            return
        entry = self._entries[self._picked]
        if entry.problem:
            self.notify(f"[tune.{entry.name}] cannot run: {entry.problem}", severity="error")
            return
        levels = ",".join(map(str, entry.levels))
        estimate = self._estimate(entry) if self._estimate is not None else None
        expected = f"\n\nExpected at most, with the verification: {estimate.text()}." if estimate is not None else ""
        question = (
            f"Start tune {entry.name}: {entry.mode} ({entry.space}) vs {entry.baseline} at C = {levels}, "
            f"{entry.repeats} passes?\n\nIt restarts the server once per setting and pass: at most "
            f"{entry.max_restarts} restarts (the drop rule saves some). The server running now is stopped. "
            f"A journal of this name is continued, nothing measured twice.{expected}"
        )
        start = self._start

        def answered(yes: bool | None) -> None:
            if yes:
                start(entry.name, estimate)

        self.app.push_screen(ConfirmScreen(question, yes="Start tune"), answered)

    def action_cancel(self) -> None:
        app: Any = self.app
        if self.running:
            app.cancel_tune()

    # -- the policy ------------------------------------------------------------------------------------

    def _summary(self) -> Text:
        r = self._report or {}
        policy = r["policy"]
        lines = [
            f"{r['mode']} vs {r['baseline']} on {r['host']}: {len(r['settings'])} settings x {len(r['levels'])} "
            f"levels; {r['restarts']} restarts of {r['full_grid_restarts']} "
            f"({r['restarts_saved']} saved by the drop rule)",
        ]
        if r.get("measured"):
            lines.append(policy_line(r))
            if r.get("speculative_measured", True):
                lines.append(f"best fixed setting: {policy['fixed'] or 'none'}")
        else:
            lines.append("no level measured yet: the table and chart fill in as levels finish")
        verify = r.get("verify")
        if verify:
            if verify.get("crash"):
                crash = verify["crash"]
                lines.append(f"verify {verify['mode']}: UNSAFE, crashed at C={crash['level']}: {crash['line']}")
            else:
                lines.append(
                    f"verify {verify['mode']}: " + ("ok" if verify["ok"] else f"worse at {verify['worse_at']}")
                )
        return Text("\n".join(lines))

    def _table(self) -> Text:
        lines = [f"{'C range':>9}  {'setting':<16} {'speedup':>8}  {'spread':>8}"]
        lines += [f"{a:>9}  {b:<16} {c:>8}  {d:>8}" for a, b, c, d in policy_rows(dict(self._report or {}))]
        text = Text("\n".join(lines))
        text.stylize("bold", 0, len(lines[0]))
        return text

    def _chart(self) -> str:
        # The dialog is min(110, 95 %) wide; border, padding and the scrollbar take 8 columns of it.
        width = max(40, min(110, int(self.app.size.width * 0.95)) - 10)
        return speedup_chart(dict(self._report or {}), width=width, height=max(8, min(16, self.app.size.height - 14)))
