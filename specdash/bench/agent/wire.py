"""The agent's records: one compact JSON line each, written to the host's record file, which a follower
streams to the client (`hello` and `gone` come from the follower, the rest from the file).

Stdlib only (it runs on the host). Every line is an object with a type `t`:

| `t` | fields | when |
|---|---|---|
| `hello` | `v` protocol, `py` Python version, `pid` (the agent's), `now` host perf_counter_ns | each follow |
| `s` | `n` sequence number, `d` the sample as a list (`sample_to_list`) | a request finished or failed |
| `k` | `a` [[10 ms bucket start ns, tokens], ...], `i` in flight, `now` | every tick (live chart) |
| `m` | `m` {gauge name: value} (`gauges.POLL_NAMES`), `now` | every `--metrics-every` s, read from `/metrics` |
| `done` | `o` the outcome (sent, failed, aborted, headroom) | the level ended |
| `crash` | `tb` the traceback | the agent failed |
| `gone` | `log` the tail of the agent's output | the agent ended without `done` or `crash` |

Times are the host's `perf_counter_ns`; the client shifts them onto its own clock (`offset_ns`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from typing import Any

from specdash import __version__
from specdash.bench.probe import Headroom, LevelOutcome, LevelPlan, ProbeSettings
from specdash.bench.samples import Failure, RequestSample
from specdash.bench.sse import Endpoint

PROTOCOL = f"{__version__}+2"
"""Client and agent must agree exactly: a mismatch is refused, never mixed."""
MIN_PYTHON = (3, 9)
"""The bundled modules run on 3.9 (newer names come from `specdash.bench.compat`; a unit test checks it)."""

_SAMPLE_FIELDS = [f.name for f in fields(RequestSample)]
_TIME_FIELDS = ("scheduled_ns", "start_ns", "end_ns", "first_token_ns", "last_token_ns")


def dumps(obj: dict[str, Any]) -> str:
    """One record line (no newline)."""
    return json.dumps(obj, separators=(",", ":"))


def sample_to_list(s: RequestSample) -> list[Any]:
    """A sample as a positional list (field order of `RequestSample`)."""
    out: list[Any] = []
    for name in _SAMPLE_FIELDS:
        value = getattr(s, name)
        if isinstance(value, Failure):
            value = value.value
        elif isinstance(value, tuple):
            value = list(value)
        out.append(value)
    return out


def sample_from_list(values: list[Any], offset_ns: int = 0) -> RequestSample:
    """Inverse of `sample_to_list`, with host times shifted by `offset_ns` onto the client's clock."""
    if len(values) != len(_SAMPLE_FIELDS):
        raise ValueError(f"a sample record has {len(values)} fields, expected {len(_SAMPLE_FIELDS)}")
    d = dict(zip(_SAMPLE_FIELDS, values))  # lengths checked above
    d["error"] = Failure(d["error"]) if d["error"] is not None else None
    d["chunk_offsets_us"] = tuple(d["chunk_offsets_us"])
    d["chunk_tokens"] = tuple(d["chunk_tokens"])
    for name in _TIME_FIELDS:
        if d[name] is not None:
            d[name] = int(d[name]) + offset_ns
    return RequestSample(**d)


def outcome_to_dict(o: LevelOutcome) -> dict[str, Any]:
    """A level's outcome as JSON-ready data."""
    return {"sent": o.sent, "failed": o.failed, "aborted": o.aborted, "headroom": asdict(o.headroom)}


def outcome_from_dict(d: dict[str, Any]) -> LevelOutcome:
    """Inverse of `outcome_to_dict`."""
    return LevelOutcome(int(d["sent"]), int(d["failed"]), d.get("aborted"), Headroom(**d["headroom"]))


def job_to_dict(url: str, settings: ProbeSettings, prompts: tuple[str, ...]) -> dict[str, Any]:
    """What an agent needs for a whole sweep (uploaded once per sweep)."""
    s = asdict(settings)
    s["endpoint"] = settings.endpoint.value
    return {"v": PROTOCOL, "url": url, "settings": s, "prompts": list(prompts)}


def job_from_dict(d: dict[str, Any]) -> tuple[str, ProbeSettings, tuple[str, ...]]:
    """Inverse of `job_to_dict`."""
    s = dict(d["settings"])
    s["endpoint"] = Endpoint(s["endpoint"])
    return str(d["url"]), ProbeSettings(**s), tuple(d["prompts"])


def plan_to_dict(plan: LevelPlan) -> dict[str, Any]:
    """A level plan as JSON-ready data."""
    return asdict(plan)


def plan_from_dict(d: dict[str, Any]) -> LevelPlan:
    """Inverse of `plan_to_dict`."""
    return LevelPlan(**d)
