"""The footer: the keys that apply now, with `? Help` and `q Quit` pinned at the right edge.

Textual's `Footer` lays every key out in one row and cuts what does not fit; the app's own keys come last,
so with a server running (more keys apply) `? Help` and `q Quit` were the first to go. Here they are taken
out of the row and docked right with the palette key, where a long row cannot push them off. A key of the row
that would run under them is hidden whole, never cut ("v? Help" at 80 columns).
"""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Footer
from textual.widgets._footer import FooterKey  # Textual's own key cell: the pinned keys look like the rest

PINNED = ("help", "quit")
"""Actions whose keys never leave the footer."""


class PinnedFooter(Footer):
    """`Footer` with `? Help` and `q Quit` (and the palette key, when shown) docked at the right edge."""

    DEFAULT_CSS = """
    PinnedFooter > .footer-pinned {
        dock: right;
        width: auto;
        height: 1;
        background: $footer-background;
    }
    PinnedFooter > .footer-pinned > FooterKey.-command-palette { dock: none; }
    /* Textual's compact footer drops the margin after a key group's label ("jk Movez Zoom"): keep one cell. */
    PinnedFooter.-compact FooterLabel { margin: 0 1 0 0; }
    """

    def compose(self) -> ComposeResult:
        pinned: list[FooterKey] = []
        for widget in super().compose():
            if isinstance(widget, FooterKey) and (widget.action in PINNED or widget.has_class("-command-palette")):
                pinned.append(widget)
            else:
                yield widget
        if pinned:
            # A class, not an id: Footer recomposes on every bindings change, and two recomposes may overlap.
            yield Horizontal(*pinned, classes="footer-pinned")

    async def recompose(self) -> None:
        await super().recompose()
        self.call_after_refresh(self._hide_covered)

    def on_resize(self, _event: events.Resize) -> None:
        for child in self.children:
            child.display = True
        self.call_after_refresh(self._hide_covered)

    def _hide_covered(self) -> None:
        """Hide the row's keys (and groups) that reach under the pinned keys, from the first one on."""
        pinned = self.query_children(".footer-pinned")
        if not pinned:
            return
        edge = pinned.first().region.x
        covered = False
        for child in self.children:
            if child.has_class("footer-pinned"):
                continue
            covered = covered or child.region.right > edge
            if covered and child.display:
                child.display = False
