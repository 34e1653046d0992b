"""A sweep's configuration and results: what to run per level and what came out (plain data).

`SweepConfig` says which levels and how much load (a running level's live state is the session's
`core.events.BenchTick`); `LevelResult` is a finished level (client stats, server view, probe headroom,
warnings); `SweepResult` is a whole sweep of one mode.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from specdash.bench.probe import Headroom, ProbeSettings
from specdash.bench.server_view import ServerView
from specdash.bench.sse import default_endpoint
from specdash.bench.summary import LevelStats
from specdash.config import LINK_LOSS_POLICIES, PROBE_PLACES
from specdash.core.events import LevelRow
from specdash.core.levels import DEFAULT_LEVELS, MAX_LEVEL, validate_levels
from specdash.errors import UsageError
from specdash.slo import LevelSlo, Slo

__all__ = ["DEFAULT_LEVELS", "MAX_LEVEL", "validate_levels"]  # the one grammar lives in specdash.core.levels

MAX_LEVEL_ATTEMPTS = 5
"""A level interrupted by link losses this many times ends the sweep (a flapping link measures nothing)."""


def url_origin(url: str) -> str:
    """`host:port` of a validated URL, without any `user:password@` (what is stored and shown)."""
    parts = urlsplit(url)
    host = f"[{parts.hostname}]" if parts.hostname and ":" in parts.hostname else (parts.hostname or "")
    return f"{host}:{parts.port}" if parts.port else host


def validate_url(url: str) -> str:
    """The base URL without a trailing slash; a `UsageError` unless it is http(s)://host:port."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # a malformed IPv6 literal, a port that is not a number or out of range
        raise UsageError(f"bad URL {url!r}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or port is None and ":" in parts.netloc:
        raise UsageError(f"bad URL {url!r}: expected http://HOST:PORT")
    if port == 0:
        raise UsageError(f"bad URL {url!r}: port 0 is out of range")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise UsageError(f"bad URL {url!r}: give the server's base URL, without a path")
    return url.rstrip("/")


@dataclass(frozen=True)
class SweepConfig:
    """How to sweep one mode."""

    mode: str = "default"
    """The mode's name (stored with the run; compared across runs)."""
    levels: tuple[int, ...] = DEFAULT_LEVELS
    """Concurrency levels, ascending."""
    max_concurrency: int | None = None
    """Drop levels above this (the user's cap)."""
    requests_per_level: int | None = None
    """Requests per level; default max(`min_requests_factor` x C, 10). Ignored with `duration_s`."""
    min_requests_factor: int = 5
    """Default requests per level as a multiple of C (reference/measurement.md §6: at least 5-10 x C)."""
    duration_s: float | None = None
    """Run each level for this long instead of a request count."""
    warmup_requests: int | None = None
    """Unmeasured requests before each level; default C (one wave). 0 disables warmup."""
    warmup_output_len: int = 16
    """Output length of warmup requests."""
    level_timeout_s: float | None = None
    """Hard bound per level; default duration + request timeout, or 3600 s with a request count."""
    flush_cache: bool = False
    """POST `/flush_cache` before every level (SGLang; skipped by the server while busy)."""
    metrics_poll_s: float = 2.0
    """Poll `/metrics` this often during a level (gauges: running/queued requests, gen throughput)."""
    processes: int | None = None
    """Probe processes: None picks per level (`workers.processes_for`), 0 runs in this event loop."""
    streams_per_process: int = 64
    """Streams one probe process drives before another is added."""
    max_processes: int | None = None
    """Upper bound on probe processes (default: CPU count)."""
    progress_interval_s: float = 1.0
    """How often `on_progress` is called."""
    on_link_loss: str = "pause"
    """When the link to the server drops mid-sweep (`Sweep.link_lost`): `pause` waits for it and runs the
    interrupted level again; `stop` ends the sweep there. Either way every request sent so far is stored."""
    link_wait_s: float = 600.0
    """A pause longer than this ends the sweep."""
    probe: str = "local"
    """`host`: over SSH, run the probe on the server's host (`specdash.bench.agent`); `local`: here."""
    settings: ProbeSettings = field(default_factory=ProbeSettings)
    """Request shape and timeouts."""
    endpoint_follows_engine: bool = False
    """`settings.endpoint` is only a default: probe on the identified engine's own (`sse.default_endpoint`:
    SGLang's `/generate`, else `/v1/completions`). The dashboard's sweeps and `bench` without `--endpoint`."""
    slo: Slo | None = None
    """Judge every level against this SLO (attainment, goodput); `--slo` / `[bench] slo`."""

    def __post_init__(self) -> None:
        if self.on_link_loss not in LINK_LOSS_POLICIES:
            raise UsageError(f"on_link_loss must be one of {', '.join(LINK_LOSS_POLICIES)}, got {self.on_link_loss!r}")
        if self.probe not in PROBE_PLACES:
            raise UsageError(f"probe must be one of {', '.join(PROBE_PLACES)}, got {self.probe!r}")
        if not self.link_wait_s > 0:
            raise UsageError(f"link_wait must be a positive number of seconds, got {self.link_wait_s!r}")

    def settings_for(self, engine: str) -> ProbeSettings:
        """The request settings for a server of `engine` (`endpoint_follows_engine` resolved); every request
        to the measured server (the sweep's, a greedy check's) takes its endpoint from here."""
        if not self.endpoint_follows_engine or not engine:  # unidentified (`bench --url`): the default stands
            return self.settings
        return dataclasses.replace(self.settings, endpoint=default_endpoint(engine))

    def effective_levels(self) -> tuple[int, ...]:
        """The validated levels, capped by `max_concurrency`."""
        levels = validate_levels(self.levels)
        if self.max_concurrency is not None:
            levels = tuple(c for c in levels if c <= self.max_concurrency)
            if not levels:
                raise UsageError(f"every level is above the concurrency cap {self.max_concurrency}")
        return levels

    def requests_for(self, concurrency: int) -> int | None:
        """Requests in a level of `concurrency`, or None in duration mode."""
        if self.duration_s is not None:
            return None
        if self.requests_per_level is not None:
            return self.requests_per_level
        return max(self.min_requests_factor * concurrency, 10)


@dataclass(frozen=True)
class LevelResult:
    """One finished (or failed) level."""

    mode: str
    """The mode."""
    concurrency: int
    """Nominal C."""
    status: str
    """`done`, `failed`, or `interrupted` (a link loss cut it short; the sweep runs it again)."""
    abort_reason: str | None
    """Why the level stopped early."""
    stats: LevelStats
    """The client's view."""
    server: ServerView
    """The server's view."""
    headroom: tuple[Headroom, ...]
    """Per probe process."""
    warnings: tuple[str, ...]
    """Everything worth a second look."""
    level_id: int | None = None
    """Row id in the store."""
    parent: Headroom | None = None
    """The sweep's own process (it carries the SSH forward and the UI) when the probe ran in workers."""
    client_limits: tuple[str, ...] = ()
    """Evidence that the client distorted the level (`specdash.bench.headroom.judge`); empty when it did not."""
    slo: LevelSlo | None = None
    """The level against the sweep's SLO, when one was given."""

    @property
    def client_limited(self) -> bool:
        """True when there is evidence that the client (probe or the process carrying the link) distorted it."""
        return bool(self.client_limits)

    def to_row(self) -> LevelRow:
        """The bench table's row for this level."""
        st = self.stats
        return LevelRow(
            mode=self.mode,
            concurrency=self.concurrency,
            status="done" if self.status == "done" else "failed",
            tok_s=st.output_tok_s,
            per_request_tok_s=st.per_request_tok_s.p50,
            ttft_p50_ms=st.ttft_ms.p50,
            tpot_p50_ms=st.tpot_ms.p50,
            ok=st.completed,
            failed=st.failed,
            server_tok_s=self.server.tok_s,
            accept_length=self.server.accept_length or st.accept_length,
            draft_share=self.server.draft_share,
            accept_per_position=self.server.accept_per_position,
            warning="; ".join(self.warnings),
            slo=self.slo,
            in_flight_at_loss=st.in_flight_at_loss,
        )

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (stored in `levels.result`)."""
        d = dataclasses.asdict(self)
        d["client_limited"] = self.client_limited
        d["slo"] = None if self.slo is None else self.slo.to_json()
        return d


@dataclass(frozen=True)
class SweepResult:
    """A whole sweep."""

    run_id: int | None
    """Row id in the store."""
    levels: tuple[LevelResult, ...]
    """Levels in the order they ran."""
    aborted: str | None
    """Why the sweep ended early."""
    probe: dict[str, str] | None = None
    """Where the probe ran and why: `{"where": "host", "python": "3.11.2"}` or `{"where": "local", "why": ...}`."""

    def curve(self) -> dict[int, float]:
        """Concurrency -> steady-state aggregate tok/s over finished levels (for `compute_crossover`)."""
        return {lv.concurrency: lv.stats.output_tok_s for lv in self.levels if lv.status == "done"}
