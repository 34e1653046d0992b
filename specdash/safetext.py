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


def escape_controls(text: str) -> str:
    """`text` with control characters (ESC, CSI, BEL, NUL, CR, LF...) shown as `\\x1b`-style escapes.

    The one home for "make untrusted text safe for the terminal": applied where text that a server or a host
    chose enters our data (HTTP bodies and errors, `/server_info` and `/v1/models`, log lines after their
    colour codes are stripped, `nvidia-smi` output, script replies), so every view and export shows it as
    read instead of letting an escape sequence act (move the cursor, retitle the window, ring the bell).
    A tab is kept (views expand it); a newline is escaped (a field is one line).
    """
    if text.isprintable() or not _CONTROLS.search(text):  # isprintable: a C-speed check for the common case
        return text
    return _CONTROLS.sub(_escaped, text)


def _escaped(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


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
