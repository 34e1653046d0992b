"""The `T` screen: the newest speculation tune's policy, as `specdash tune` printed it.

Read-only: the per-range table (setting or "no speculation", speedup ± spread), the threshold, the
restarts the drop rule saved, the verification's outcome and the speedup-vs-C chart with the 1.0 line.
The data comes from the tune's journal (`specdash.server.tune_report.load_latest`), read in a worker.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

NO_TUNE = (
    "No tune yet. Run one, e.g.\n"
    "  specdash tune HOST --mode eagle3 --space 'steps=1,2,3,5 topk=1,4 draft=4,8,16'\n"
    "or offline: specdash tune demo --mode eagle3 --space 'steps=1,3 topk=1,4 draft=4,8'"
)


class TuneScreen(ModalScreen[None]):
    """Shows one tune report (`None`: there is none yet)."""

    BINDINGS = [Binding("escape,T,q", "dismiss", "Close", id="tune-close", tooltip="Close the tune view")]

    def __init__(self, report: dict[str, Any] | None) -> None:
        super().__init__()
        self._report = report

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="tune-dialog"):
            if self._report is None:
                yield Static(Text(NO_TUNE), id="tune-summary")
                return
            yield Static(self._summary(), id="tune-summary")
            yield Static(self._table(), id="tune-policy")
            yield Static(Text(self._chart()), id="tune-chart")

    def on_mount(self) -> None:
        dialog = self.query_one("#tune-dialog")
        name = self._report["name"] if self._report else ""
        dialog.border_title = f"Tune {name}".strip()
        dialog.border_subtitle = "esc: close"

    def _summary(self) -> Text:
        r = self._report or {}
        policy = r["policy"]
        threshold = policy["disable_above"]
        lines = [
            f"{r['mode']} vs {r['baseline']} on {r['host']}: {len(r['settings'])} settings x {len(r['levels'])} "
            f"levels; {r['restarts']} restarts of {r['full_grid_restarts']} ({r['restarts_saved']} saved)",
            f"speculation stops paying above C = {threshold}" if threshold else "speculation never pays",
            f"best fixed setting: {policy['fixed'] or 'none'}",
        ]
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
        from specdash.server.tune_report import policy_rows

        lines = [f"{'C range':>9}  {'setting':<16} {'speedup':>8}  {'spread':>8}"]
        lines += [f"{a:>9}  {b:<16} {c:>8}  {d:>8}" for a, b, c, d in policy_rows(self._report or {})]
        text = Text("\n".join(lines))
        text.stylize("bold", 0, len(lines[0]))
        return text

    def _chart(self) -> str:
        from specdash.server.tune_report import speedup_chart

        # The dialog is min(110, 95 %) wide; border, padding and the scrollbar take 8 columns of it.
        width = max(40, min(110, int(self.app.size.width * 0.95)) - 10)
        return speedup_chart(self._report or {}, width=width, height=max(8, min(16, self.app.size.height - 14)))
