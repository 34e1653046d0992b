"""What an app told the user: every `notify` call, recorded as it is made.

`App.notify` only posts a message; the toast rack (`app._notifications`) takes the notice when the app handles
that message, and drops it once its timeout has passed. On a loaded machine a test that read the rack right after
its key presses found two notices of three (ci23, six workers) or none of one (ci22). The record holds what the
app said, from the call on, whatever the rack does with it later.

    notices = record_notices(app)   # before `app.run_test()`
    ...
    assert [n.message for n in notices] == [...]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.app import App


@dataclass(frozen=True)
class Said:
    """One notice, with the fields of Textual's `Notification` that tests read."""

    message: str
    title: str
    severity: str


def record_notices(app: App[Any]) -> list[Said]:
    """Record every notice `app` gives from now on (each screen's and widget's `notify` goes through the app's)."""
    said: list[Said] = []
    notify = app.notify

    def recording(message: str, *, title: str = "", severity: str = "information", **kwargs: Any) -> None:
        said.append(Said(str(message), title, severity))
        notify(message, title=title, severity=severity, **kwargs)  # type: ignore[arg-type]

    app.notify = recording  # type: ignore[method-assign]
    return said
