"""The mode list: number keys select, space marks modes for an A/B, the running one is flagged."""

from __future__ import annotations

from textual.content import Content
from textual.reactive import reactive
from textual.style import Style as VisualStyle
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from specdash.core.events import ModesChanged, ServerStatus
from specdash.core.status_text import look, mode_marker
from specdash.phases import Origin, Phase


class ModeList(OptionList):
    """The configured modes, in config order; the highlighted one is what `s` and `m` act on."""

    COMPONENT_CLASSES = {"mode-list--current", "mode-list--marked", "mode-list--dim", "mode-list--crashed"}

    DEFAULT_CSS = """
    ModeList {
        text-wrap: nowrap;
        text-overflow: ellipsis;
        & > .mode-list--current { color: $success; text-style: bold; }
        & > .mode-list--marked { color: $accent; text-style: bold; }
        & > .mode-list--dim { color: $text-muted; }
        & > .mode-list--crashed { color: $error; text-style: bold; }
    }
    """

    modes: reactive[ModesChanged] = reactive(ModesChanged(()), init=False, always_update=True)
    """The modes and the running one, as the session last said."""

    status: reactive[ServerStatus] = reactive(ServerStatus(Phase.STOPPED, origin=Origin.UNKNOWN), init=False)
    """The server's state: the marker beside its mode says what the server panel says."""

    marked: reactive[frozenset[str]] = reactive(frozenset(), init=False)
    """Modes marked for an A/B sweep."""

    def on_mount(self) -> None:
        self.border_title = "Modes"

    @property
    def names(self) -> list[str]:
        """Mode names in list order."""
        return [mode.name for mode in self.modes.modes]

    @property
    def selected(self) -> str | None:
        """The highlighted mode's name."""
        names = self.names
        index = self.highlighted
        return names[index] if index is not None and 0 <= index < len(names) else None

    def select_number(self, number: int) -> bool:
        """Highlight the `number`-th mode (1-based); False when there is no such mode."""
        if not 1 <= number <= len(self.names):
            return False
        self.highlighted = number - 1
        return True

    def toggle_mark(self) -> str | None:
        """Mark or unmark the highlighted mode for an A/B; returns its name."""
        name = self.selected
        if name is not None:
            self.marked = self.marked - {name} if name in self.marked else self.marked | {name}
        return name

    def watch_modes(self) -> None:
        self.marked = frozenset(name for name in self.marked if name in self.names)
        self._rebuild()

    def watch_marked(self) -> None:
        self._rebuild()

    def watch_status(self, old: ServerStatus, new: ServerStatus) -> None:
        if (old.mode, mode_marker(old, old.mode)) != (new.mode, mode_marker(new, new.mode)):
            self._rebuild()  # not on every tick of a starting server: only when the marker changes

    def notify_style_update(self) -> None:
        super().notify_style_update()
        if self.is_mounted:
            self._rebuild()

    def _rebuild(self) -> None:
        keep = self.highlighted
        current = self.modes.current
        if keep is None and self.modes.modes:
            # Start on the running mode, so `m` and `b` act on what is on screen.
            keep = self.names.index(current) if current in self.names else 0
        options = [
            Option(self._prompt(i, info.name, info.engine, info.description, current, info.resident))
            for i, info in enumerate(self.modes.modes)
        ]
        self.clear_options()
        self.add_options(options)
        if options:
            self.highlighted = min(keep or 0, len(options) - 1)

    def _prompt(
        self, index: int, name: str, engine: str, description: str, current: str | None, resident: str = ""
    ) -> Content:
        def style(component: str) -> VisualStyle:
            # Partial: only the component's own colour, so the highlight's background shows through.
            return self.get_visual_style(component, partial=True)

        parts: list[str | tuple[str, VisualStyle]] = [
            (f"{index + 1} " if index < 9 else "  ", style("mode-list--dim")),
            ("◆ " if name in self.marked else "  ", style("mode-list--marked")),
            (name, style("mode-list--current")) if name == current else name,
        ]
        # The state right after the name: a narrow list cuts the end of the line, never what runs.
        if resident:  # a resident mode's server, right after the name: asleep (N GiB held), waking, verifying
            busy = resident in ("waking", "verifying", "going to sleep")
            parts.append((f" {resident}", style("mode-list--marked" if busy else "mode-list--dim")))
        if marker := mode_marker(self.status, name):
            key = look(self.status).key
            component = {"crashed": "mode-list--crashed", "stopped": "mode-list--dim", "stopping": "mode-list--dim"}
            parts.append((f"  {marker}", style(component.get(key, "mode-list--current"))))
        parts.append((f"  {engine}", style("mode-list--dim")))
        if description:
            parts.append((f"  {description}", style("mode-list--dim")))
        return Content.assemble(*parts)
