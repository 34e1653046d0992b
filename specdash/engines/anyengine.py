"""Rules for a log whose engine is not known: the engine-agnostic evidence alone (`engines.evidence`).

Not an engine (it defines no `RULES`, so the registry does not list it): `registry.make_rules("unknown")`
gives it, for a replayed log that names no engine, and for a log view fed lines without a tracker.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specdash.engines.base import EngineRules, HealthState, LogLine, Observation


class AnyEngineRules(EngineRules):
    """Reads any server's log by the shapes every engine shares; identifies no server."""

    name = "unknown"

    @classmethod
    def identify(cls, server_info: Mapping[str, Any] | None, models: Mapping[str, Any] | None) -> bool:
        """Never: an unknown engine is what is left when no engine claims a server."""
        return False

    def split_prefix(self, text: str, tag: str) -> LogLine:
        """No engine prefix is known: the line is its own message."""
        return LogLine(raw=text, text=text, rank=tag, tag=tag)

    def observe_line(self, line: LogLine) -> list[Observation]:
        """Nothing engine-specific; `observe` adds the evidence."""
        return []

    @staticmethod
    def health_state(status: int | None, *, ready: bool) -> HealthState:
        """Refused is loading, 200 ready; anything else says nothing about the phase."""
        if status is None:
            return HealthState.LOADING
        return HealthState.READY if status == 200 else HealthState.UNKNOWN
