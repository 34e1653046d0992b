"""The one home for making untrusted text safe for the terminal (`escape_controls`: server bodies, log lines,
host replies, `nvidia-smi` output), below every layer that reads such text.

Stdlib only and Python 3.9: the probe agent ships it to the host (`bench.agent.bundle.MODULES`).
"""

from __future__ import annotations

import re
from typing import Any

_CONTROLS = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
"""Every C0 control but the tab, DEL, every C1 control (`\\x9b` is a one-byte CSI), and the Unicode line
separators and bidirectional overrides (which reorder what is shown around them)."""
_ESCAPES = {
    code: (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
    for code in range(0x2070)
    if _CONTROLS.match(chr(code))
}
"""What each character of `_CONTROLS` is shown as, for one C-speed `str.translate` (a regex substitution with a
Python callback per match took 12.5 s for 5 MB of BEL)."""
_CONTROL_RUN = re.compile(f"(?:{_CONTROLS.pattern})+")
_LONG_RUN = 64
"""A text whose first control run is this long is escaped run by run; otherwise character by character
(`str.translate`): both linear, each the faster where it is used."""


def escape_controls(text: str) -> str:
    """`text` with control characters (ESC, CSI, BEL, NUL, CR, LF...) shown as `\\x1b`-style escapes.

    The one home for "make untrusted text safe for the terminal": applied where text that a server or a host
    chose enters our data (HTTP bodies and errors, `/server_info` and `/v1/models`, log lines after their
    colour codes are stripped, `nvidia-smi` output, script replies, the lines `logs` prints), so every view and
    export shows it as read instead of letting an escape sequence act (move the cursor, retitle the window,
    write the clipboard with OSC 52, ring the bell, reorder the line with a bidi override).
    A tab is kept (views expand it); a newline is escaped (a field is one line); a run of `_LONG_RUN` or more
    of one control character is shown once with its count (`[\\x00 x 65536]`). Linear and C-speed.
    """
    if text.isprintable():  # a C-speed check for the common case
        return text
    first = _CONTROL_RUN.search(text)
    if first is None:
        return text
    if first.end() - first.start() >= _LONG_RUN:  # a hole of NULs, a flood of BELs: a run at a time
        return _CONTROL_RUN.sub(_escaped_run, text)
    return text.translate(_ESCAPES)


def _escaped_run(m: re.Match[str]) -> str:
    run = m.group()
    if len(run) >= _LONG_RUN and run.count(run[0]) == len(run):
        # A run of one control character (the NULs of a log truncated in place, a flood of BELs) is shown
        # once with its count: what a reader can use, and what follows (parsing, the views) stays short.
        return f"[{_ESCAPES[ord(run[0])]} x {len(run)}]"
    return run.translate(_ESCAPES)


def escape_controls_in(value: Any) -> Any:
    """`value` (parsed JSON: dicts, lists, strings, numbers) with `escape_controls` applied to every string in it,
    keys included. Iterative, so JSON nested deeper than the recursion limit is no crash here."""
    if not isinstance(value, (dict, list)):
        return escape_controls(value) if isinstance(value, str) else value
    out: Any = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any]] = [(value, out)]
    while stack:
        src, dst = stack.pop()
        for key, item in src.items() if isinstance(src, dict) else enumerate(src):
            if isinstance(item, (dict, list)):
                new: Any = {} if isinstance(item, dict) else []
                stack.append((item, new))
            else:
                new = escape_controls(item) if isinstance(item, str) else item
            if isinstance(dst, dict):
                dst[escape_controls(key) if isinstance(key, str) else key] = new
            else:
                dst.append(new)
    return out
