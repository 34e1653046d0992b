"""Log batches as a session sends them, from raw lines: each line read by a real startup tracker.

A `LogBatch` carries classified lines only (the session's tracker reads each line once). Tests that have raw
log text read it here the way the session does: a `StartupTracker` that reads engine-agnostically until a
line names its engine (`detect_engine`), then by that engine's rules; one `RawLog` is one run's tracker, so
consecutive batches of it share state (a traceback across batches) as a session's do.
"""

from __future__ import annotations

from collections.abc import Iterable

from specdash.core.events import LogBatch
from specdash.core.startup import StartupTracker
from specdash.core.startup_events import ClassifiedLine
from specdash.engines.registry import UNKNOWN, detect_engine, make_rules


class RawLog:
    """One run's log read by one tracker: raw lines in, classified lines and batches out."""

    def __init__(self) -> None:
        self._tracker = StartupTracker(make_rules(UNKNOWN))

    def classify(self, raw: Iterable[str]) -> tuple[ClassifiedLine, ...]:
        """Each raw line as the tracker read it (colour codes and wrappers stripped, kind, bar identity)."""
        out: list[ClassifiedLine] = []
        for line in raw:
            line = line.rstrip("\r\n")
            if self._tracker.engine == UNKNOWN:
                engine = detect_engine([line])
                if engine != UNKNOWN:
                    self._tracker = StartupTracker(make_rules(engine))
            out += self._tracker.feed_lines([line])[1]
        return tuple(out)

    def batch(self, raw: Iterable[str], *, reset: bool = False) -> LogBatch:
        """A batch of `raw`, classified by this log's tracker (a reset batch starts a new run: a new tracker)."""
        if reset:
            self._tracker = StartupTracker(make_rules(UNKNOWN))
        return LogBatch(self.classify(raw), reset=reset)


def log_batch(raw: Iterable[str], *, reset: bool = False) -> LogBatch:
    """A batch of `raw` lines read by a fresh tracker (for batches whose lines stand alone)."""
    return RawLog().batch(raw, reset=reset)
