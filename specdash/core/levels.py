"""Concurrency levels: the one grammar, default and limit the CLI (`--levels`), the dashboard and the sweep use.

Grammar (`LEVELS_GRAMMAR`): items separated by commas and/or spaces, each

- `N`: one level, e.g. `1,2,5,10`;
- `A-B`: every level from A to B, e.g. `1-4` is 1, 2, 3, 4;
- `A-BxF`: A, then times F while at most B, e.g. `1-64x2` is 1, 2, 4, ..., 64 (doubling).

Levels are whole numbers from 1 to `MAX_LEVEL`, at most `MAX_LEVEL_COUNT` of them; the result is sorted and
de-duplicated. Anything else is a `UsageError` naming the item.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from specdash.errors import UsageError

DEFAULT_LEVELS: tuple[int, ...] = (1, 2, 5, 10, 20, 50, 100)
"""Concurrency levels swept when none are given (CLI, dashboard, `SweepConfig`)."""
MAX_LEVEL = 1024
"""The largest concurrency accepted (the probe keeps at most this many streams per level)."""
MAX_LEVEL_COUNT = 64
"""Most levels in one sweep (a range like `1-1000` is a typo for `1-1000x2`)."""
LEVELS_GRAMMAR = "N[,N...], ranges A-B (every level) and A-BxF (times F: 1-64x2 = 1,2,4,...,64)"
"""The grammar in one line, for --help and error messages."""

_ITEM = re.compile(r"^(\d+)(?:-(\d+)(?:x(\d+))?)?$")


def format_levels(levels: tuple[int, ...]) -> str:
    """`(1, 2, 5)` -> `1,2,5` (what `parse_levels` reads back)."""
    return ",".join(map(str, levels))


def parse_levels(text: str) -> tuple[int, ...]:
    """Parse `LEVELS_GRAMMAR`: `1,2,5`, `1-4`, `1-64x2` (see the module docstring); a `UsageError` otherwise."""
    items = text.replace(",", " ").split()
    if not items:
        raise UsageError(f"no concurrency levels given (expected {LEVELS_GRAMMAR})")
    levels: set[int] = set()
    for item in items:
        m = _ITEM.match(item) if len(item) <= 40 else None  # 5,000 digits would not even convert to int
        if m is None:
            shown = item if len(item) <= 40 else item[:37] + "..."
            raise UsageError(f"{shown!r} is not a concurrency level or range (expected {LEVELS_GRAMMAR})")
        first = int(m.group(1))
        last = int(m.group(2)) if m.group(2) is not None else first
        factor = int(m.group(3)) if m.group(3) is not None else None
        for value in (first, last):
            _check(value, item)
        if last < first:
            raise UsageError(f"{item!r}: the range ends below its start")
        if factor is not None and factor < 2:
            raise UsageError(f"{item!r}: the factor after 'x' must be 2 or more")
        if factor is None:
            if last - first + 1 > MAX_LEVEL_COUNT:
                raise UsageError(f"{item!r} is {last - first + 1} levels; at most {MAX_LEVEL_COUNT} per sweep")
            levels.update(range(first, last + 1))
        else:
            value = first
            while value <= last:
                levels.add(value)
                value *= factor
        if len(levels) > MAX_LEVEL_COUNT:
            raise UsageError(f"more than {MAX_LEVEL_COUNT} concurrency levels in {text.strip()!r}")
    return tuple(sorted(levels))


def validate_levels(levels: tuple[int, ...]) -> tuple[int, ...]:
    """Sorted, de-duplicated levels; a `UsageError` for none, too many, or any outside 1..`MAX_LEVEL`."""
    if not levels:
        raise UsageError("no concurrency levels given")
    for c in levels:
        _check(c, str(c))
    unique = tuple(sorted(set(levels)))
    if len(unique) > MAX_LEVEL_COUNT:
        raise UsageError(f"{len(unique)} concurrency levels; at most {MAX_LEVEL_COUNT} per sweep")
    return unique


def _check(value: int, item: str) -> None:
    if not 1 <= value <= MAX_LEVEL:
        raise UsageError(f"concurrency levels must be between 1 and {MAX_LEVEL}, got {value} in {item!r}")


def around(levels: Sequence[int], level: int) -> tuple[int, ...]:
    """`level` and its neighbours in `levels` (the one below, the one above, where there are): the levels
    to rerun around a crash."""
    ordered = sorted(set(levels) | {level})
    i = ordered.index(level)
    return tuple(ordered[max(0, i - 1) : i + 2])
