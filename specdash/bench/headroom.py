"""Was a level client-limited? Only on evidence that the client distorted its numbers (pure logic).

A warning that fires when the numbers are right teaches users to ignore it, so each piece of evidence comes
with a bound on what it can have done to the level's aggregate tok/s, and a level is flagged when a bound
exceeds `LIMIT` (1 %):

1. Offered concurrency not sustained: inside the steady window, the mean in-flight count fell short of C.
   Bound: the idle share `1 - achieved / C` (the aggregate is concave in C: C' streams give >= C'/C of it).
2. Send delay large against the requests' duration: Σ delay / Σ (delay + E2E) over all of the level's
   requests (a share of slot time, not the p99 of a handful). Bound: that share.
3. The probe's event loop stamped late. A lateness common to every stamp cancels out of a rate; what moves
   it is the difference between the lateness at the window's two edges, which the lag's p90 bounds.
   Bound: lag p90 / window.
4. The probe's core saturated (>= 90 % of a core; asyncio is single-threaded) while the server had headroom
   (it never ran C requests, below its own cap): the server was waiting on the client.

The sweep's own process (the dashboard, or the CLI) matters only when it carries the link: with an SSH port
forward in it, its event-loop lateness delays every stream's bytes (bound as for the probe's stamps). When it
does not carry the link (a direct URL), its lag cannot touch the measurement, which runs in probe processes
of its own: then the level gets a note that the *UI* lagged, not a flag.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specdash.bench.samples import RequestSample
from specdash.core.series import Window

LIMIT = 0.01
"""Flag a level when a piece of evidence can have moved its tok/s by more than this share."""
CPU_SATURATED = 0.90
"""A probe process using this share of one core is saturated."""
UI_LAG_NOTE_MS = 20.0
"""Sweep-process event-loop lag (p99) above which the level notes that the UI lagged."""


@dataclass(frozen=True)
class Load:
    """One process's load during a level (a probe worker, or the sweep's own process)."""

    cpu_share: float
    """CPU time / wall time (1.0 = one core)."""
    lag_p90_ms: float
    """p90 lateness of its ticker's wake-ups."""
    lag_p99_ms: float
    """p99 lateness."""


@dataclass(frozen=True)
class LevelEvidence:
    """What a level's samples and loads say about the client (`evidence()` builds it)."""

    concurrency: int
    """Nominal C."""
    requests: int
    """Requests sent."""
    window_s: float
    """Length of the steady-state window (the whole level when there was none)."""
    idle_share: float | None
    """1 - (mean in-flight count inside the steady window) / C; None without a steady window."""
    send_share: float
    """Σ send delay / Σ (send delay + E2E) over the level's requests."""
    probes: tuple[Load, ...]
    """Each probe process."""
    parent: Load | None = None
    """The sweep's own process (None when the probe ran in it)."""
    link_in_parent: bool = False
    """The sweep's process carries the link to the server (an SSH port forward)."""
    server_running_max: float | None = None
    """Most running requests the server reported during the level (None: no server view)."""
    server_cap: int | None = None
    """The server's cap on running requests, when known."""


@dataclass(frozen=True)
class Verdict:
    """The rule's answer for one level."""

    reasons: tuple[str, ...]
    """Why the level is client-limited; empty when the client did not distort it."""
    notes: tuple[str, ...] = ()
    """Things worth saying that did not distort it (the UI lagged)."""

    @property
    def client_limited(self) -> bool:
        """True when some evidence says the client distorted the level."""
        return bool(self.reasons)


def idle_share(samples: Sequence[RequestSample], concurrency: int, window: Window | None) -> float | None:
    """1 - mean in-flight count / C inside `window` (None without a steady window)."""
    if window is None or not window.steady or concurrency <= 0:
        return None
    span = window.end_ns - window.start_ns
    if span <= 0:
        return None
    busy = sum(max(0, min(s.end_ns, window.end_ns) - max(s.start_ns, window.start_ns)) for s in samples)
    return max(0.0, 1.0 - busy / (span * concurrency))


def send_share(samples: Sequence[RequestSample]) -> float:
    """Σ (start - scheduled) / Σ (end - scheduled): the share of slot time spent before sending."""
    delay = sum(max(0, s.start_ns - s.scheduled_ns) for s in samples)
    total = sum(max(0, s.end_ns - s.scheduled_ns) for s in samples)
    return delay / total if total > 0 else 0.0


def evidence(
    samples: Sequence[RequestSample],
    concurrency: int,
    window: Window | None,
    probes: Sequence[Load],
    parent: Load | None = None,
    link_in_parent: bool = False,
    server_running_max: float | None = None,
    server_cap: int | None = None,
) -> LevelEvidence:
    """Gather a level's evidence from its samples, its steady window and its processes' loads."""
    if window is not None and window.end_ns > window.start_ns:
        window_s = (window.end_ns - window.start_ns) / 1e9
    elif samples:
        window_s = (max(s.end_ns for s in samples) - min(s.start_ns for s in samples)) / 1e9
    else:
        window_s = 0.0
    return LevelEvidence(
        concurrency=concurrency,
        requests=len(samples),
        window_s=window_s,
        idle_share=idle_share(samples, concurrency, window),
        send_share=send_share(samples),
        probes=tuple(probes),
        parent=parent,
        link_in_parent=link_in_parent,
        server_running_max=server_running_max,
        server_cap=server_cap,
    )


def _stamp_bound(lag_p90_ms: float, window_s: float) -> float:
    return lag_p90_ms / 1000 / window_s if window_s > 0 else 0.0


def judge(ev: LevelEvidence) -> Verdict:
    """Apply the rule of the module docstring."""
    reasons: list[str] = []
    notes: list[str] = []
    if ev.idle_share is not None and ev.idle_share > LIMIT:
        achieved = ev.concurrency * (1 - ev.idle_share)
        reasons.append(
            f"offered concurrency not sustained ({achieved:.2f} of {ev.concurrency} in flight on average, "
            f"{ev.idle_share:.1%} of slot time idle)"
        )
    if ev.send_share > LIMIT:
        reasons.append(f"send delay {ev.send_share:.1%} of the requests' time")
    if ev.probes:
        worst = max(ev.probes, key=lambda p: p.lag_p90_ms)
        if _stamp_bound(worst.lag_p90_ms, ev.window_s) > LIMIT:
            reasons.append(f"probe event-loop lag p90 {worst.lag_p90_ms:.1f} ms against a {ev.window_s:.1f} s window")
        busiest = max(ev.probes, key=lambda p: p.cpu_share)
        ceiling = min(ev.concurrency, ev.server_cap) if ev.server_cap else ev.concurrency
        server_waited = ev.server_running_max is not None and ev.server_running_max < ceiling
        if busiest.cpu_share >= CPU_SATURATED and server_waited:
            reasons.append(
                f"probe CPU {busiest.cpu_share:.0%} of a core while the server ran at most "
                f"{ev.server_running_max:g} of {ev.concurrency} requests"
            )
    parent = ev.parent
    if parent is not None:
        if ev.link_in_parent and _stamp_bound(parent.lag_p90_ms, ev.window_s) > LIMIT:
            reasons.append(
                f"the SSH forward's process lagged (event-loop lag p90 {parent.lag_p90_ms:.1f} ms "
                f"against a {ev.window_s:.1f} s window)"
            )
        elif parent.lag_p99_ms >= UI_LAG_NOTE_MS:
            where = "it also carries the SSH forward, within bounds" if ev.link_in_parent else "the probe runs apart"
            notes.append(
                f"the UI lagged (event-loop lag p99 {parent.lag_p99_ms:.0f} ms), not the measurement ({where})"
            )
    return Verdict(tuple(reasons), tuple(notes))
