"""Properties of the tracker under any input: it never raises, never goes backwards in phase or in progress
within a phase, and is not confused by ranks whose lines interleave in any order."""

from __future__ import annotations

import random
import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specdash.core.startup import StartupTracker
from specdash.core.startup_events import Crashed, PhaseChanged, ProgressChanged, Ready, StartupEvent
from specdash.core.timeline import Timeline
from specdash.engines.registry import make_rules
from specdash.phases import Phase

LOGS = Path(__file__).parent.parent / "fixtures" / "logs"
ALL_LOGS = sorted(LOGS.rglob("*.log"))
REAL_LINES = [line for path in ALL_LOGS for line in path.read_text().splitlines()]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_forward(engine: str, events: list[StartupEvent]) -> None:
    """Phases strictly forward along the engine's order; progress strictly up within the current phase (or
    a finished bar starting over at 0: a second pass); at most one Ready and one Crashed; nothing phase-like
    after a crash."""
    order = {phase: i for i, phase in enumerate(make_rules(engine).startup_order)}
    current = Phase.LAUNCHING
    best: dict[Phase, float] = {}
    crashed = ready = False
    for event in events:
        if isinstance(event, PhaseChanged):
            assert not crashed
            assert order[event.phase] > order[current], (current, event.phase)
            current = event.phase
        elif isinstance(event, ProgressChanged):
            assert not crashed
            assert event.phase is current
            restart = best.get(event.phase) == 1.0 and event.progress.done == 0
            assert event.progress.fraction > best.get(event.phase, -1.0) or restart
            best[event.phase] = event.progress.fraction
        elif isinstance(event, Ready):
            assert not ready and not crashed and current is Phase.READY
            ready = True
        elif isinstance(event, Crashed):
            assert not crashed
            crashed = True


def rank_streams(text: str) -> list[list[str]]:
    """Split a log into one stream per rank tag (`TP0`, `DP1 TP1`, untagged), each in its original order."""
    streams: dict[str, list[str]] = {}
    for line in text.splitlines():
        m = re.match(r"\[[^\]]*?((?: [A-Z]+\d+)*)\]", line)
        streams.setdefault(m.group(1) if m else "", []).append(line)
    return list(streams.values())


def interleave(streams: list[list[str]], rng: random.Random) -> list[str]:
    """A random merge that keeps each stream's own order (as ranks writing to one file do)."""
    positions = [0] * len(streams)
    out: list[str] = []
    while True:
        live = [i for i, stream in enumerate(streams) if positions[i] < len(stream)]
        if not live:
            return out
        i = rng.choice(live)
        out.append(streams[i][positions[i]])
        positions[i] += 1


@SETTINGS
@given(engine=st.sampled_from(["sglang", "vllm"]), chunks=st.lists(st.text(), max_size=30))
def test_random_text(engine: str, chunks: list[str]) -> None:
    tracker = StartupTracker(engine)
    events: list[StartupEvent] = []
    for i, chunk in enumerate(chunks):
        events += tracker.feed(chunk, now=float(i))
        events += tracker.tick(now=float(i) + 0.5)
    events += tracker.finish()
    assert tracker.internal_errors == 0
    assert_forward(engine, events)
    Timeline.from_events(events).as_dict()


@SETTINGS
@given(engine=st.sampled_from(["sglang", "vllm"]), chunks=st.lists(st.binary(), max_size=30))
def test_random_bytes(engine: str, chunks: list[bytes]) -> None:
    tracker = StartupTracker(engine)
    events: list[StartupEvent] = []
    for chunk in chunks:
        events += tracker.feed(chunk)
    events += tracker.finish()
    assert tracker.internal_errors == 0
    assert_forward(engine, events)


@SETTINGS
@given(
    engine=st.sampled_from(["sglang", "vllm"]),
    lines=st.lists(
        st.one_of(
            st.sampled_from(REAL_LINES),
            st.sampled_from(REAL_LINES).map(lambda s: s[: len(s) // 2]),
            st.text(max_size=80),
        ),
        max_size=60,
    ),
    statuses=st.lists(st.sampled_from([None, 200, 503, 404]), max_size=5),
)
def test_real_lines_in_any_order(engine: str, lines: list[str], statuses: list[int | None]) -> None:
    tracker = StartupTracker(engine, started_at=0.0)
    events: list[StartupEvent] = []
    for i, line in enumerate(lines):
        events += tracker.feed_line(line, now=float(i))
        if statuses and i % 7 == 0:
            events += tracker.health(statuses[i % len(statuses)], at=float(i))
    events += tracker.tick(now=1e6) + tracker.process_exited(1, at=1e6 + 1)
    assert tracker.internal_errors == 0
    assert_forward(engine, events)


@SETTINGS
@given(seed=st.integers(min_value=0, max_value=2**32 - 1), cut=st.integers(min_value=1, max_value=400))
def test_interleaved_ranks_reach_ready(seed: int, cut: int) -> None:
    text = (LOGS / "synthetic" / "sglang_v056_eagle3_tp2_ready.log").read_text()
    merged = "\n".join(interleave(rank_streams(text), random.Random(seed))) + "\n"
    tracker = StartupTracker("sglang")
    events: list[StartupEvent] = []
    for start in range(0, len(merged), cut):  # and the stream arrives in arbitrary pieces
        events += tracker.feed(merged[start : start + cut])
    events += tracker.finish()
    assert tracker.internal_errors == 0
    assert_forward("sglang", events)
    assert tracker.phase is Phase.READY
    assert not any(isinstance(e, Crashed) for e in events)


@SETTINGS
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_interleaved_real_multi_rank_logs(seed: int) -> None:
    for name in ("sglang_12421_eagle3_tp4_load.log", "sglang_7691_dp_tp_rocm_v048.log"):
        merged = interleave(rank_streams((LOGS / name).read_text()), random.Random(seed))
        tracker = StartupTracker("sglang")
        events = [e for line in merged for e in tracker.feed_line(line)] + tracker.finish()
        assert tracker.internal_errors == 0
        assert_forward("sglang", events)
        assert tracker.highest is Phase.ALLOCATING_KV
