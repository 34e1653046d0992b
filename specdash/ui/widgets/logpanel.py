"""The log area: the view, its search input and a status line (following, filter, matches)."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.markup import escape
from textual.widgets import Input

from specdash.ui.messages import LogLines
from specdash.ui.widgets.logview import LogView


class SearchInput(Input):
    """The `/` prompt; escape closes it without searching."""

    BINDINGS = [Binding("escape", "close", "Close search", id="search-close", tooltip="Close the search prompt")]

    def action_close(self) -> None:
        self.value = ""
        self.display = False
        self.screen.set_focus(None)


class LogPanel(Vertical):
    """Tail of the server log with follow, errors-only filter and search; `z` shows it on the whole screen."""

    ALLOW_MAXIMIZE = True

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self.view = LogView(id="log-view")
        """The log view (made here: the app posts log lines to it from the start)."""

    def compose(self) -> ComposeResult:
        yield self.view
        yield SearchInput(placeholder="search the log (enter: find, esc: close)", id="log-search")

    def on_mount(self) -> None:
        self.border_title = "Log"
        self.query_one(SearchInput).display = False
        self.watch(self.view, "follow", self._describe, init=False)
        self.watch(self.view, "errors_only", self._describe, init=False)
        self.watch(self.view, "needle", self._describe, init=False)
        self.watch(self.view, "wrap", self._describe, init=False)
        self.watch(self.view, "timestamps", self._describe, init=False)
        self._describe()

    @on(LogLines)
    def _lines_shown(self, message: LogLines) -> None:
        # The view has shown them (the message bubbled up from it).
        message.stop()
        self._describe()

    def open_search(self) -> None:
        """Show the search prompt, prefilled with the last search."""
        search = self.query_one(SearchInput)
        search.display = True
        search.value = self.view.needle
        # Now, not on a later turn (`Widget.focus` defers it): the keys typed right after `/` may already be
        # waiting, and each goes to whatever has the focus when it is read.
        self.screen.set_focus(search)

    @on(Input.Submitted, "#log-search")
    def _submitted(self, event: Input.Submitted) -> None:
        search = self.query_one(SearchInput)
        search.display = False
        self.screen.set_focus(None)
        self.view.needle = event.value.strip()
        self.screen.refresh_bindings()  # n and N apply only with a search
        if self.view.needle:
            self.find(forward=False, from_end=True)

    def find(self, *, forward: bool, from_end: bool = False) -> bool:
        """Move to the next (or previous) match; the first search starts at the newest line."""
        view = self.view
        line = view.find(view.needle, forward=forward, start=None if from_end else view.marked)
        if line is None:
            self.notify(f"No line contains {view.needle!r}", severity="warning", timeout=3)
            return False
        view.jump_to(line)
        self._describe()
        return True

    def _describe(self, *_args: object) -> None:
        view = self.view
        parts = ["following" if view.follow else "paused (f: follow)"]
        if view.errors_only:
            parts.append("errors and warnings only")
        if view.needle:
            parts.append(f"/{escape(view.needle)}  n/N: next/previous")
        if view.wrap:
            parts.append("wrapped")
        if not view.timestamps:
            parts.append("no times")
        lines = f"{len(view.shown):,} lines"
        if view.folded:
            lines += f" ({view.folded:,} bar redraws folded)"
        parts.append(lines)
        self.border_subtitle = " · ".join(parts)
