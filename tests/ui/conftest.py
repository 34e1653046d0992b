"""UI fixtures: a fixed clock, the fake session and an app built through `make_app` with no live timers."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import pytest

from specdash.config import UIConfig
from specdash.ui.app import SpecdashApp, make_app
from tests.support.fake_session import Event, FakeSession, FakeTunes
from tests.support.scenarios import NOW

AppFactory = Callable[..., tuple[SpecdashApp, FakeSession]]


@pytest.fixture
def build() -> AppFactory:
    """Build (app, session) from a list of events the session replays on subscribe."""

    def factory(
        events: Iterable[Event] = (),
        *,
        keymap: Mapping[str, str] | None = None,
        bell: bool = True,
    ) -> tuple[SpecdashApp, FakeSession]:
        session = FakeSession(events, label="root@gpu-box")
        app = make_app(
            session,
            config_ui=UIConfig(bell=bell),
            keymap=keymap,
            clock=lambda: NOW,
            live=False,
            tunes=FakeTunes(session),
        )
        return app, session

    return factory
