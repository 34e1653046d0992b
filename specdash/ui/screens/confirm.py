"""Modal questions: confirm a destructive action, edit the concurrency levels of a sweep."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label

from specdash.core.levels import format_levels, parse_levels
from specdash.errors import UsageError


class ConfirmScreen(ModalScreen[bool]):
    """Says what will happen and waits for yes or no."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes", id="confirm-yes", tooltip="Do it"),
        Binding("n,escape", "answer(False)", "No", id="confirm-no", tooltip="Leave everything as it is"),
    ]

    def __init__(self, question: str, *, yes: str = "Yes", no: str = "No") -> None:
        super().__init__()
        self._question = question
        self._yes = yes
        self._no = no
        self.held: list[tuple[str, dict[str, Any]]] = []
        """Notifications that came while the question was up (`SpecdashApp.notify`): shown once it is answered."""

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self._question, id="question", markup=False)
            with Horizontal(id="buttons"):
                yield Button(f"{self._yes} (y)", variant="error", id="yes")
                yield Button(f"{self._no} (n / esc)", variant="default", id="no")

    def on_mount(self) -> None:
        # A question the user must answer is never covered: toasts lie above every screen, and a long one (the
        # startup advice at 80 columns) hid the whole question. Those on screen when it opens (5-8 s notices,
        # already shown) are cleared; those that come while it is up are held and shown once it is answered.
        self.app.clear_notifications()
        self.query_one("#no", Button).focus()

    def on_unmount(self) -> None:
        held, app = list(self.held), self.app

        def show() -> None:  # after the pop: the screen below shows them
            for message, options in held:
                app.notify(message, **options)

        app.call_later(show)

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class LevelsScreen(ModalScreen[tuple[int, ...] | None]):
    """Asks for the concurrency levels of a sweep, saying how long they should take (`expect`, redone as the
    levels are edited); enter runs it, escape gives up."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="levels-cancel", tooltip="Do not run a sweep")]

    def __init__(
        self, title: str, levels: tuple[int, ...], expect: Callable[[tuple[int, ...]], str] | None = None
    ) -> None:
        super().__init__()
        self._title = title
        self._levels = levels
        self._expect = expect

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self._title, id="question", markup=False)
            yield Input(format_levels(self._levels), placeholder="1,2,5,10 or 1-64x2", id="levels")
            yield Label(self._expected(self._levels), id="levels-eta", markup=False)
            yield Label("enter: run · esc: cancel", id="levels-error", markup=False)

    def _expected(self, levels: tuple[int, ...]) -> str:
        return f"Expected: {self._expect(levels)}" if self._expect is not None else ""

    @on(Input.Changed, "#levels")
    def _changed(self, event: Input.Changed) -> None:
        try:
            levels = parse_levels(event.value)
        except UsageError:
            return  # said on enter; the last valid estimate stays
        self.query_one("#levels-eta", Label).update(self._expected(levels))

    @on(Input.Submitted, "#levels")
    def _submitted(self, event: Input.Submitted) -> None:
        try:
            self.dismiss(parse_levels(event.value))
        except UsageError as exc:
            error = self.query_one("#levels-error", Label)
            error.update(exc.message)
            error.add_class("-invalid")

    def action_cancel(self) -> None:
        self.dismiss(None)
