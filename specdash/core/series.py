"""Rolling series for measurement: token rates, percentiles, steady-state windows (pure, no I/O).

Times are integer nanoseconds from `time.perf_counter_ns()`. On Linux that clock is CLOCK_MONOTONIC and
shared by every process on the machine, so stamps taken in probe worker processes can be merged here.

Definitions (reference/measurement.md §2):

| quantity | definition |
|---|---|
| tok/s (live) | tokens credited at the arrival time of the chunk that carried them, summed over a window |
| per-second bucket | tokens whose chunk arrived in [k s, k+1 s) |
| steady state | from the moment the in-flight count first reaches C to the moment it last drops below C |
| achieved concurrency | Σ E2E / wall time |
| percentiles | linear interpolation between closest ranks (numpy's default), over the finite values given |
"""

from __future__ import annotations

import math
import operator
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

NS_PER_S = 1_000_000_000


def percentile(values: Sequence[float], p: float) -> float | None:
    """The `p`-th percentile (0-100) of `values` by linear interpolation; None when empty.

    Args:
        values: The observations, in any order.
        p: The percentile, 0 to 100.

    Returns:
        The interpolated percentile, or None when there are no values.
    """
    if not values:
        return None
    ordered = sorted(values)
    if len(ordered) == 1:
        return float(ordered[0])
    rank = (len(ordered) - 1) * min(100.0, max(0.0, p)) / 100.0
    lo = math.floor(rank)
    hi = min(lo + 1, len(ordered) - 1)
    frac = rank - lo
    return float(ordered[lo] + (ordered[hi] - ordered[lo]) * frac)


@dataclass(frozen=True)
class Percentiles:
    """The summary statistics shown for every latency and rate: mean and four percentiles."""

    count: int
    """Number of observations."""
    mean: float | None
    """Arithmetic mean; None without observations."""
    p10: float | None
    """10th percentile."""
    p50: float | None
    """Median."""
    p90: float | None
    """90th percentile."""
    p99: float | None
    """99th percentile."""
    std: float | None = None
    """Population standard deviation (as numpy's default, which sglang.bench_serving reports)."""

    @classmethod
    def of(cls, values: Iterable[float]) -> Percentiles:
        """Summarise `values`; every field is None when there are none."""
        vals = sorted(map(float, values))
        if not vals:
            return cls(0, None, None, None, None, None, None)
        mean = sum(vals) / len(vals)
        dev = [v - mean for v in vals]
        std = math.sqrt(sum(map(operator.mul, dev, dev)) / len(vals))  # a level has 10^4-10^5 ITL values
        return cls(
            count=len(vals),
            mean=mean,
            p10=percentile(vals, 10),
            p50=percentile(vals, 50),
            p90=percentile(vals, 90),
            p99=percentile(vals, 99),
            std=std,
        )


class RateWindow:
    """Tokens credited at arrival times; reports tok/s over a sliding window.

    The deque holds (t_ns, tokens) and is trimmed to `window_s` on every `add` and `rate`, so it stays
    bounded however long the run lasts.
    """

    def __init__(self, window_s: float = 2.0) -> None:
        """Create an empty window.

        Args:
            window_s: The width of the sliding window in seconds.
        """
        if window_s <= 0:
            raise ValueError("window_s must be positive")
        self._window_ns = int(window_s * NS_PER_S)
        self._items: deque[tuple[int, int]] = deque()
        self._sum = 0
        self._latest = 0

    def add(self, t_ns: int, tokens: int) -> None:
        """Credit `tokens` at `t_ns` (arrivals may come slightly out of order across workers)."""
        self._items.append((t_ns, tokens))
        self._sum += tokens
        self._latest = max(self._latest, t_ns)
        self._trim(self._latest)

    def rate(self, now_ns: int | None = None) -> float:
        """Tokens per second over the window ending at `now_ns` (default: the latest arrival)."""
        now = self._latest if now_ns is None else now_ns
        self._trim(now)
        return self._sum * NS_PER_S / self._window_ns

    def __len__(self) -> int:
        return len(self._items)

    def _trim(self, now_ns: int) -> None:
        horizon = now_ns - self._window_ns
        items = self._items
        while items and items[0][0] <= horizon:
            self._sum -= items.popleft()[1]


class SecondBuckets:
    """Tokens per whole second since `origin_ns`, keeping only the last `keep` seconds."""

    def __init__(self, origin_ns: int, keep: int = 600) -> None:
        """Create empty buckets.

        Args:
            origin_ns: The time of second 0.
            keep: How many of the most recent seconds to retain.
        """
        self.origin_ns = origin_ns
        self._keep = keep
        self._buckets: deque[tuple[int, int]] = deque()

    def add(self, t_ns: int, tokens: int) -> None:
        """Credit `tokens` to the second containing `t_ns`."""
        sec = (t_ns - self.origin_ns) // NS_PER_S
        b = self._buckets
        if b and b[-1][0] == sec:
            b[-1] = (sec, b[-1][1] + tokens)
        elif not b or sec > b[-1][0]:
            b.append((sec, tokens))
        else:
            # A late credit for an earlier second (worker ticks interleave): rebuild that bucket.
            items = dict(b)
            items[sec] = items.get(sec, 0) + tokens
            b.clear()
            b.extend(sorted(items.items()))
        while len(b) > self._keep:
            b.popleft()

    def items(self) -> list[tuple[int, int]]:
        """(second, tokens) pairs, oldest first."""
        return list(self._buckets)

    def peak(self) -> int:
        """The largest one-second total (peak tok/s)."""
        return max((v for _, v in self._buckets), default=0)


@dataclass(frozen=True)
class Window:
    """A time interval [start_ns, end_ns]."""

    start_ns: int
    """Start of the window."""
    end_ns: int
    """End of the window."""
    steady: bool = True
    """False when no steady state was found and the window is the whole level instead."""

    @property
    def seconds(self) -> float:
        """The window's length in seconds."""
        return max(0, self.end_ns - self.start_ns) / NS_PER_S


def steady_state_window(
    intervals: Sequence[tuple[int, int]], concurrency: int, first_tokens: Sequence[int | None] | None = None
) -> Window | None:
    """The steady-state part of a closed-loop level.

    The window opens when the in-flight count first reaches `concurrency` (the last request of the first
    wave has started) and, given `first_tokens`, every request then in flight has received its first token
    (the first wave's prefill is ramp-up too: excluded; a request the server queues until the first one
    finishes is steady state, not ramp-up); it closes when the count last drops below
    `concurrency` (the load loop stopped replacing finished requests: drain excluded). Between those two
    points a slot is only ever empty for the moment between a request's end and its replacement's start,
    and the replacements' prefills are part of the steady state, as they are on a loaded server.

    When the count never reaches `concurrency` (too few requests, failures, several worker processes
    starting apart), the whole level from first start to last end is returned with `steady=False`.

    Args:
        intervals: (start_ns, end_ns) of every request of the level, finished or failed.
        concurrency: The nominal concurrency C.
        first_tokens: The first token's arrival per request (None where none came), in `intervals`' order.

    Returns:
        The window, or None without intervals.
    """
    if not intervals:
        return None
    if first_tokens is not None and len(first_tokens) != len(intervals):
        raise ValueError(f"{len(first_tokens)} first tokens for {len(intervals)} intervals")
    events: list[tuple[int, int]] = []
    for start, end in intervals:
        events.append((start, 1))
        events.append((max(start, end), -1))
    # Ends sort before starts at the same instant, so a replacement does not count as overlap.
    events.sort()
    inflight = 0
    opened: int | None = None
    last_full_idx: int | None = None
    for i, (t, delta) in enumerate(events):
        inflight += delta
        if inflight >= concurrency:
            if opened is None:
                opened = t
            last_full_idx = i
    first_start = events[0][0]
    last_end = events[-1][0]
    if opened is None or last_full_idx is None or last_full_idx + 1 >= len(events):
        return Window(first_start, last_end, steady=False)
    closed = events[last_full_idx + 1][0]
    if first_tokens is not None:
        # A request still queued when the first one of the wave finishes (the server caps running requests
        # below C) waits as part of the steady state, not of the ramp-up: its first token does not count.
        first_end = min(end for start, end in intervals if start <= opened < end)
        ready = [
            ft
            for (start, end), ft in zip(intervals, first_tokens)
            if ft is not None and start <= opened < end and ft <= first_end
        ]
        opened = max([opened, *ready])
    if closed <= opened:
        return Window(first_start, last_end, steady=False)
    return Window(opened, closed, steady=True)


def tokens_in_window(streams: Iterable[tuple[int, Sequence[tuple[int, int]]]], window: Window) -> float:
    """Tokens generated inside the window, each chunk's tokens spread evenly over the gap before it.

    `streams` holds, per request, its start and its (arrival ns, tokens) chunks in order. A chunk's tokens
    are generated between the previous arrival (the request's start for the first chunk) and its own, so
    the window takes the share of that gap it covers. Counting whole chunks at their arrival instead
    misses up to one decode step at an edge: with synchronised batches the window closes just after one
    stream's last token and before the other streams' tokens of the same step, a bias of -1/(steps in the
    window), -0.9 % for a 256-token EAGLE-3 request (about 116 steps).
    """
    lo, hi = window.start_ns, window.end_ns
    total = 0.0
    for start, chunks in streams:
        prev = start
        for t, tok in chunks:  # once per chunk of the level: plain comparisons, not min()/max() calls
            if t > prev:
                covered = (t if t < hi else hi) - (prev if prev > lo else lo)
                if covered > 0:
                    total += tok * covered / (t - prev)
                prev = t
            elif lo <= t <= hi:
                total += tok
    return total


def achieved_concurrency(e2e_ns: Iterable[int], wall_ns: int) -> float:
    """Σ E2E / wall time (sglang.bench_serving's "Concurrency"); 0 when the wall time is 0."""
    return sum(e2e_ns) / wall_ns if wall_ns > 0 else 0.0
