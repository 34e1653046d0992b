"""Server and host text with terminal escapes, through the parsers that take it in, to the rendered dashboard
(issue 14): what the screen shows holds no ESC, BEL or other C0/C1 control, and the text is still readable.

The text enters as it does for real: log lines raw (the viewer's classifier cleans them), the crash reason from
a tracker that read the hostile log, the model/version from the control-plane parser, process command lines
and the run's mode as the remote replies are parsed. The dashboard itself escapes nothing: if one of those
boundaries let a control through, this test sees it on screen.
"""

from __future__ import annotations

import re

from specdash.core.events import Notice, ServerStatus
from specdash.core.startup import StartupTracker
from specdash.engines.registry import make_rules
from specdash.phases import Phase
from specdash.remote.events import Connected
from specdash.safetext import escape_controls, escape_controls_in
from specdash.server.lifecycle import _replies
from tests.support import scenarios as sc
from tests.support.log_batches import log_batch
from tests.ui.conftest import AppFactory

SIZES = ((80, 24), (160, 45))
HOSTILE_LOG = (
    "[2026-11-30 10:00:00] Load weight begin. \x1b]0;pwned-title\x07",  # an OSC retitle
    "bell \x07 nul \x00 lone-esc \x1b here",
    "c1-csi \x9b2J and \x9d8;;http://x\x9c",  # 8-bit CSI, OSC and ST
    "bidi \u202eevil\u202c and del \x7f",
    "[2026-11-30 10:00:01] \x1b[31mred\x1b[0m coloured is fine",
)
CRASH_LOG = (
    "Traceback (most recent call last):",
    '  File "x.py", line 1, in <module>',
    "RuntimeError: CUDA out of memory\x07\x1b[2J\x9b1;1H",
)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _status() -> ServerStatus:
    tracker = StartupTracker(make_rules("sglang"))
    tracker.feed_lines([*HOSTILE_LOG, *CRASH_LOG])
    tracker.finish()
    assert tracker.crash is not None
    # A status reply: the run's meta (mode from the host's record) and the members still alive.
    tag = "@sd-0011"
    replies = dict(_replies(f"{tag} member 4242 python -m sglang \x1b]0;x\x07--evil\n{tag} mode eagle3\x1b[5m\n", tag))
    return ServerStatus(
        Phase.CRASHED,
        mode=escape_controls(replies["mode"]),
        engine=escape_controls_in({"owned_by": "sglang\x1b[1m"})["owned_by"],
        port=30000,
        started_at=sc.NOW - 70,
        crash=tracker.crash,
        leftovers=(escape_controls(replies["member"]),),
        note=escape_controls("attached to run 2026\x1b[2J"),
    )


async def test_hostile_text_renders_without_controls(build: AppFactory) -> None:
    status = _status()
    notice = Notice(f"{status.mode} crashed: {status.crash.reason if status.crash else ''}", "error")
    for size in SIZES:
        app, _ = build([sc.MODES, Connected(sc.HOST, 1), status, log_batch(HOSTILE_LOG + CRASH_LOG), notice])
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await pilot.pause()
            screen = app.export_screenshot()  # what the compositor drew, as SVG text
            found = _CONTROL.findall(screen.replace("\n", ""))
            assert not found, sorted(set(found))
            assert "\\x07" in screen or "\\x1b" in screen  # the hostile text is shown, escaped
    assert tracker_reason_is_escaped(status)


def tracker_reason_is_escaped(status: ServerStatus) -> bool:
    reason = status.crash.reason if status.crash else ""
    return "CUDA out of memory" in reason and not _CONTROL.search(reason)
