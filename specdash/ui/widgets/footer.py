"""The footer: the keys that apply now, with `? Help` and `q Quit` pinned at the right edge.

Textual's `Footer` lays every key out in one row and cuts what does not fit; the app's own keys come last,
so with a server running (more keys apply) `? Help` and `q Quit` were the first to go. Here they are taken
out of the row and docked right with the palette key, where a long row cannot push them off. A key of the row
that would run under them is hidden whole, never cut ("v? Help" at 80 columns).

Textual's `Footer` also rebuilds its keys on every bindings change the screen signals, and nine in ten of those
change nothing it shows (a mode highlighted, a status that keeps the same keys): 819 of 921 rebuilds over the
cockpit's and the dashboard's UI tests. Each rebuild mounts every key again and restyles each one, about a
quarter of the CPU time of those tests; here a rebuild that would show the same keys is skipped.
"""

from __future__ import annotations

from typing import Any

from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Footer
from textual.widgets._footer import (  # Textual's own cells: the pinned keys look like the rest
    FooterKey,
    FooterLabel,
)

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

    _composed: tuple[Any, ...] | None = None
    """What the keys on show were composed from (`_shown`), None before the first compose."""

    def _shown(self) -> tuple[Any, ...]:
        """Everything `Footer.compose` reads: the shown bindings of the screen in order (each `Binding` with
        its group), whether each is enabled and its tooltip, and whether the palette key is shown."""
        if not self._bindings_ready:
            return (False,)
        active = self.screen.active_bindings
        keys = tuple((binding, enabled, tooltip) for (_, binding, enabled, tooltip) in active.values() if binding.show)
        return (True, self.show_command_palette, keys)

    def compose(self) -> ComposeResult:
        self._composed = self._shown()
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
        if self._composed is not None and self.is_attached and self._shown() == self._composed:
            return
        await super().recompose()
        self.call_after_refresh(self._hide_covered)

    def on_resize(self, _event: events.Resize) -> None:
        for child in self.children:
            child.display = True
        self.call_after_refresh(self._hide_covered)

    def _hide_covered(self, tries: int = 8) -> None:
        """Hide the row's keys (and groups) that reach under the pinned keys, from the first one on. Children
        not laid out yet (no width) are waited for, a few refreshes at most."""
        pinned = self.query_children(".footer-pinned")
        if not pinned:
            return
        shown = [child for child in self.children if child.display]
        if any(child.region.width == 0 for child in shown) and tries > 0:
            self.call_after_refresh(self._hide_covered, tries - 1)
            return
        edge = pinned.first().region.x
        # Compact keys have no padding: keep one blank cell before the pinned ones ("Move? Help" reads as one word).
        limit = edge - 1 if self.compact else edge
        row = [child for child in self.children if not child.has_class("footer-pinned")]
        covered = hid = False
        for i, child in enumerate(row):
            # A group's keys ("jk") and its label ("Move") are siblings: they go together, never the keys alone.
            label = row[i + 1] if i + 1 < len(row) and isinstance(row[i + 1], FooterLabel) else None
            right = label.region.right if label is not None and not isinstance(child, FooterLabel) else 0
            covered = covered or max(child.region.right, right) > limit or (label is not None and not label.display)
            if covered and child.display:
                child.display = False
                hid = True
        if hid:
            self.refresh(layout=True)  # repaint the cells the hidden keys drew (else a stale "j" stays on screen)
