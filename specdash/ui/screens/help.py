"""The `?` screen: every key, grouped, with what it does, as the keymap has made it."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

HelpRow = tuple[str, str, str]
"""(keys as displayed, what it does, more detail)."""

QUIT_KEEPS_SERVER = "q quits specdash only: the server keeps running on the host, and the next specdash attaches to it."
"""What `q` does in `connect` (the demo says what it does instead)."""
FOOTNOTE = "ctrl+p opens the command palette with every action. Keys can be remapped in [keymap] of config.toml."


class HelpScreen(ModalScreen[None]):
    """Lists every binding of the dashboard and the app."""

    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close", id="help-close", tooltip="Close help")]

    def __init__(self, sections: list[tuple[str, list[HelpRow]]], quit_note: str = QUIT_KEEPS_SERVER) -> None:
        super().__init__()
        self._sections = sections
        self._quit_note = quit_note

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-dialog"):
            yield Static(Text(f"{self._quit_note}\n{FOOTNOTE}"), id="help-footnote")
            yield Static(self._table(), id="help-keys")

    def on_mount(self) -> None:
        self.query_one("#help-dialog").border_title = "Keys"
        self.query_one("#help-dialog").border_subtitle = "esc: close"

    def _table(self) -> Table:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold", no_wrap=True)
        table.add_column()
        table.add_column(style="dim")
        for title, rows in self._sections:
            table.add_row(Text(title, style="underline"), "", "")
            for keys, description, detail in rows:
                table.add_row(Text(keys), Text(description), Text(detail))
            table.add_row("", "", "")
        return table
