"""The gauges a poll reads during a level, from a server's Prometheus text (stdlib only: it ships in the probe
agent, which polls its host's `/metrics` next to the server; the local sweep's polls read them the same way).

The reads before and after a level take every sample, counters and labels included, through
`prometheus_client`'s parser (`server_view.parse_prometheus`). A poll every 2 s needs five gauges of a text that
is mostly histogram buckets, and that parser walks every character in Python (0.9 ms for the simulator's 6 KB,
more for a real server's): this reads only the lines it wants, summed over their label sets as
`parse_prometheus` sums them (a unit test holds the two to the same answer).
"""

from __future__ import annotations

from collections.abc import Collection

POLL_NAMES = frozenset(
    {
        "sglang:gen_throughput",
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
    }
)
"""The gauges `server_view.level_view` reads from the polls during a level."""


def read_gauges(text: str, names: Collection[str] = POLL_NAMES) -> dict[str, float]:
    """`name{labels} value [timestamp]` lines of `names` -> name -> value summed over label sets; comments,
    other names, NaN and lines that do not parse are skipped."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        end = len(line)
        for stop in ("{", " ", "\t"):
            at = line.find(stop, 0, end)
            if at >= 0:
                end = at
        name = line[:end]
        if name not in names:
            continue
        rest = line[end:]
        if rest.startswith("{"):
            close = rest.rfind("}")
            if close < 0:
                continue
            rest = rest[close + 1 :]
        fields = rest.split()
        if not fields:
            continue
        try:
            value = float(fields[0])
        except ValueError:
            continue
        if value == value:  # not NaN
            out[name] = out.get(name, 0.0) + value
    return out
