"""Short human text for durations, rates and states, shared by the widgets."""

from __future__ import annotations

import math

from textual.dom import DOMNode

from specdash.core.models import Phase


def duration(seconds: float | None) -> str:
    """`42s`, `3m 05s`, `1h 02m`, `3d 04h`; `-` when unknown."""
    if seconds is None or math.isnan(seconds):
        return "-"
    total = max(0, int(seconds + 0.5))
    if total < 60:
        return f"{total}s"
    minutes, secs = divmod(total, 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours:02d}h"


def rate(tok_s: float | None) -> str:
    """`1,234` tok/s with a thousands separator; `-` when unknown."""
    return "-" if tok_s is None else f"{tok_s:,.0f}"


def state_class(phase: Phase) -> str:
    """The CSS class that colours a server state: ready, starting, crashed, stopping or stopped."""
    if phase is Phase.READY:
        return "-ready"
    if phase is Phase.CRASHED:
        return "-crashed"
    if phase is Phase.STOPPING:
        return "-stopping"
    if phase.is_startup:
        return "-starting"
    return "-stopped"


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
