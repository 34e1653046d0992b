"""Short human text for durations, rates and states, shared by the widgets."""

from __future__ import annotations

from textual.dom import DOMNode

from specdash.core.events import ServerStatus
from specdash.core.status_text import duration, look

__all__ = ["STATE_CLASSES", "bar", "duration", "rate", "state_class", "swap_class"]


def rate(tok_s: float | None) -> str:
    """`1,234` tok/s with a thousands separator; `-` when unknown."""
    return "-" if tok_s is None else f"{tok_s:,.0f}"


def state_class(status: ServerStatus | None) -> str:
    """The CSS class that colours a server state: ready, starting, crashed, stopping or stopped."""
    key = "unknown" if status is None else look(status).key
    return "-stopped" if key == "unknown" else f"-{key}"


STATE_CLASSES = ("-ready", "-crashed", "-stopping", "-starting", "-stopped")
"""Every class `state_class` returns, to remove the old one."""


def swap_class(widget: DOMNode, choices: tuple[str, ...], chosen: str) -> None:
    """Make `chosen` the one class of `choices` on `widget`, touching nothing when it already is.

    `remove_class(...).add_class(...)` would restyle the widget's subtree twice on every clock tick.
    """
    for name in choices:
        widget.set_class(name == chosen, name)


def bar(fraction: float, width: int) -> tuple[str, str]:
    """A progress bar as (filled, empty) strings of heavy rules, at half-cell resolution."""
    width = max(1, width)
    halves = round(max(0.0, min(1.0, fraction)) * width * 2)
    full, half = divmod(halves, 2)
    filled = "━" * full + ("╸" if half else "")
    return filled, "━" * (width - len(filled))
