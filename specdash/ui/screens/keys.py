"""The dashboard's key bindings, by screen area: each has an `id` (for `[keymap]`) and a `tooltip`.

The defaults, in one place so the help screen, the command palette and the README agree.
"""

from __future__ import annotations

from textual.binding import Binding


def _b(
    key: str,
    action: str,
    description: str,
    bid: str,
    tooltip: str,
    *,
    show: bool = True,
    group: Binding.Group | None = None,
    priority: bool = False,
) -> Binding:
    return Binding(key, action, description, show=show, id=bid, tooltip=tooltip, group=group, priority=priority)


_MOVE = Binding.Group("Move", compact=True)
"""j/k share one footer entry, as in less, k9s and lazydocker."""


SERVER_BINDINGS = [
    _b("s", "start", "Start", "start", "Start the highlighted mode on the host"),
    _b("x", "stop", "Stop", "stop", "Stop the live server (SIGTERM, then SIGKILL of its process group)"),
    _b("r", "restart", "Restart", "restart", "Stop the live server and start the same mode again"),
    _b("m", "switch", "Switch", "switch", "Stop the live server and start the highlighted mode"),
    _b("c", "show_crash", "Show crash", "show-crash", "Jump to the crash's exception line in the log"),
]
MODE_BINDINGS = [
    *(
        _b(str(n), f"select_mode({n})", f"Mode {n}", f"select-mode-{n}", f"Highlight mode {n}", show=False)
        for n in range(1, 10)
    ),
    _b("space", "mark", "Mark A/B", "mark", "Mark or unmark the highlighted mode for an A/B sweep", show=False),
]
BENCH_BINDINGS = [
    _b("b", "sweep", "Sweep", "sweep", "Run a concurrency sweep on the live mode (levels editable)"),
    _b("a", "ab", "A/B", "ab", "Sweep every marked mode in turn (restarts the server between them)"),
    _b("escape", "cancel_sweep", "Cancel sweep", "cancel-sweep", "Stop the running sweep; finished levels are kept"),
    _b(
        "R",
        "rerun_crash",
        "Rerun crash",
        "rerun-crash",
        "Rerun the level a sweep crashed at and its neighbours (once the server is back; levels editable)",
    ),
    _b("p", "chart_view", "Chart", "chart-view", "Switch the curves chart: tok/s by C, speedup, Pareto"),
    _b(
        "y",
        "copy_summary",
        "Copy",
        "copy-summary",
        "Copy the sweep as Markdown (verdict, one row per C, speedups) and, after an A/B, its policy in the "
        "engine's launch flags, to the clipboard, over SSH too (OSC 52)",
        show=False,
    ),
    _b(
        "o",
        "greedy",
        "Greedy check",
        "greedy-check",
        "Greedy spot check: the live mode's outputs at temperature 0 against the reference mode's stored ones",
        show=False,
    ),
]
LOG_BINDINGS = [
    _b("f", "follow", "Follow", "follow", "Keep the newest log line in view, or stop scrolling", show=False),
    # Priority: the app runs it as it reads the key, so the prompt has the focus before the next key is read
    # (keys typed right after `/`, or pasted with it, are routed when read; a plain binding runs later).
    _b("slash", "search", "Search", "search", "Search the log (case-insensitive)", priority=True),
    _b("n", "search_next", "Next", "search-next", "Next match (further down)"),
    _b("N", "search_previous", "Prev", "search-previous", "Previous match (further up)"),
    _b("e", "errors", "Errors", "errors", "Show only errors, warnings and tracebacks (again: show all)", show=False),
    _b("w", "wrap", "Wrap", "wrap", "Wrap long log lines (again: one line each, scroll sideways)"),
    _b("t", "timestamps", "Times", "timestamps", "Hide or show the timestamps at the start of log lines", show=False),
]
VIEW_BINDINGS = [
    _b("j", "move('down')", "Down", "down", "Move down in the focused panel (the log when none is)", group=_MOVE),
    _b("k", "move('up')", "Up", "up", "Move up in the focused panel (the log when none is)", group=_MOVE),
    _b("g", "move('top')", "Top", "top", "Go to the first line of the focused panel", show=False),
    _b("G", "move('bottom')", "Bottom", "bottom", "Go to the last line (in the log: follow again)", show=False),
    _b(
        "z", "zoom", "Zoom", "zoom", "The focused panel on the whole screen (in the log also enter); again or esc: back"
    ),
    _b("v", "page", "Page", "page", "Small terminals: switch between server + log and sweep + charts"),
]
