"""What a session tells its viewers (the dashboard, the headless CLI): plain, Textual-free events.

A `specdash.server.session` object owns the connection, the server lifecycle, the watcher and the bench,
and emits these events; the UI turns each into a message for its widgets. High-rate streams arrive
batched (`LogBatch`, `BenchTick` about 4 times a second), so a viewer never sees one event per log line.
Connection events are `specdash.remote.events.ConnectionEvent`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from specdash.core.greedy import GreedyCheck
from specdash.core.startup_events import ClassifiedLine
from specdash.phases import CrashInfo, Origin, Phase, Progress
from specdash.slo import LevelSlo


@dataclass(frozen=True)
class ServerStatus:
    """Everything the server panel shows, as one snapshot (emitted on every change)."""

    phase: Phase
    """Where the server is."""
    mode: str = ""
    """The mode it runs in (empty when stopped and unknown)."""
    engine: str = ""
    """`sglang` or `vllm`."""
    pid: int | None = None
    """The engine's main process on the host."""
    port: int | None = None
    """Its HTTP port on the host."""
    started_at: float | None = None
    """Launch time (epoch seconds): uptime and startup elapsed are measured from it."""
    phase_started_at: float | None = None
    """When the current phase began (epoch seconds)."""
    progress: Progress | None = None
    """Progress inside the current phase: shards n/N, graph batch sizes done/total."""
    timeline: tuple[tuple[Phase, float], ...] = ()
    """Finished startup phases with their durations in seconds, in order."""
    eta_remaining: float | None = None
    """Seconds to ready from history; None when there is no history (the UI says so)."""
    eta_samples: int = 0
    """How many past startups the ETA is based on."""
    eta_spread: float | None = None
    """One standard deviation of the ETA over those startups, seconds (None with fewer than two)."""
    crash: CrashInfo | None = None
    """Why it died (exception line first), when phase is CRASHED."""
    note: str = ""
    """A short extra line (e.g. `stuck in capturing CUDA graphs for 600 s`, `attached to run ...`)."""
    origin: Origin = Origin.LAUNCHED
    """How specdash came to watch this server (launched, attached, adopted; unknown before it looked)."""
    leftovers: tuple[str, ...] = ()
    """After a crash: processes still alive in the run's process group ("PID ARGS"), to clean up."""
    command: tuple[str, ...] = ()
    """The server's command line (shown for an adopted server)."""
    job_id: str = ""
    """On a Slurm host: the batch job running the server."""
    queued: str = ""
    """While the job pends: Slurm's reason and the queue position (`queued: Resources (1st of 2 ...)`)."""
    queue_wait_s: float | None = None
    """How long the job waited in the queue before it ran (kept apart from the startup)."""
    ranks: tuple[int, int] | None = None
    """Engine ranks up and in all (`2/2`), for a server over several nodes."""


@dataclass(frozen=True)
class LogBatch:
    """New server log lines, in order (split on `\\r` and `\\n` once, by the watcher's tracker)."""

    lines: tuple[ClassifiedLine, ...]
    """The lines as the tracker read them: cleaned text, kind, progress-bar identity (the one reading)."""
    reset: bool = False
    """True when a new run starts: the viewer clears what it shows first."""


@dataclass(frozen=True)
class ModeInfo:
    """One configured mode, for the mode list."""

    name: str
    """The mode's name."""
    engine: str
    """`sglang` or `vllm`."""
    description: str = ""
    """One line."""
    resident: str = ""
    """A resident mode's server: `awake`, `asleep (0.6 GiB held)`, `waking`, `verifying`; `resident` when it has
    none; empty for a mode that is not resident."""


@dataclass(frozen=True)
class ModesChanged:
    """The configured modes and which one runs now."""

    modes: tuple[ModeInfo, ...]
    """All modes, in config order."""
    current: str | None = None
    """The running (or starting) mode, if any."""


@dataclass(frozen=True)
class GpuSample:
    """One GPU, from `nvidia-smi`."""

    index: int
    util_pct: float
    mem_used_mib: float
    mem_total_mib: float
    power_w: float | None = None


@dataclass(frozen=True)
class GpuStats:
    """A poll of every GPU on the host (never emitted on hosts without `nvidia-smi`)."""

    gpus: tuple[GpuSample, ...]


@dataclass(frozen=True)
class LevelRow:
    """One concurrency level of a sweep, as the bench table shows it."""

    mode: str
    concurrency: int
    status: Literal["pending", "warmup", "running", "paused", "done", "failed"]
    tok_s: float | None = None
    """Aggregate output tok/s over the level's steady state (client side)."""
    per_request_tok_s: float | None = None
    """Median per-request tok/s."""
    ttft_p50_ms: float | None = None
    tpot_p50_ms: float | None = None
    ok: int = 0
    failed: int = 0
    server_tok_s: float | None = None
    """The server's own figure (SGLang gen throughput, vLLM generation tokens), when available."""
    accept_length: float | None = None
    """Mean acceptance length (speculative modes): tokens per verify step over the level's window."""
    draft_share: float | None = None
    """Share of the output tokens that came from accepted drafts, where the engine counts them (vLLM)."""
    accept_per_position: tuple[float, ...] = ()
    """Acceptance rate of each draft position, first position first, where the engine counts it (vLLM)."""
    warning: str = ""
    """e.g. `client and server disagree by 14 %`, `server caps running requests at 48`, `client-limited`."""
    slo: LevelSlo | None = None
    """The level against the sweep's SLO (attainment, goodput), when one is set."""
    crash: str = ""
    """Why the server died during this level (its exception line), when it did: the level it crashed at."""
    in_flight_at_loss: int | None = None
    """Requests in flight when the level's first request lost its connection (the load a crash came at)."""


@dataclass(frozen=True)
class BenchTick:
    """The live state of the running level (about 4 per second): the one object from the sweep to the chart.

    The sweep makes it (`specdash.bench.sweep`), the session passes it on as it is, the
    dashboard draws it and the headless CLI prints it.
    """

    mode: str
    concurrency: int
    t: float
    """Seconds since the level (not the warmup) started."""
    tok_s: float
    """Aggregate tok/s over the last second (tokens credited at chunk arrival)."""
    done: int
    """Requests finished in this level (ok or failed)."""
    total: int | None
    """Requests planned for this level (None in duration mode)."""
    phase: Literal["warmup", "running", "paused"] = "running"
    """`warmup`, `running`, or `paused` (waiting for the link to come back)."""
    failed: int = 0
    """Requests failed."""
    inflight: int = 0
    """Requests in flight."""
    in_flight_at_loss: int | None = None
    """Requests in flight when the level's first request lost its connection (the server died or went away):
    the load a crash came at (`bench.summary.in_flight_at_loss`); None while none did."""


@dataclass(frozen=True)
class BenchUpdate:
    """The sweep's table and curves (emitted when a level starts or ends)."""

    rows: tuple[LevelRow, ...]
    curves: Mapping[str, tuple[tuple[int, float], ...]] = field(default_factory=dict)
    """mode -> ((concurrency, tok/s), ...) over finished levels."""
    crossover: float | None = None
    """The concurrency above which speculation stops paying, when two modes were measured."""
    crossover_text: str = ""
    """A sentence about the crossover (`EAGLE-3 wins up to C=3.2; baseline above`)."""
    running: bool = False
    """True while the sweep still runs."""
    policy: str = ""
    """The verdict in the engine's own launch flags, as Markdown (`core.spec_export.policy_markdown`): which
    mode to run at which load, with the fixed and dynamic forms; "" until two modes have finished levels."""


@dataclass(frozen=True)
class GreedyUpdate:
    """The greedy spot check (`core.greedy`) on the live mode: running, its outcome against the reference's
    stored outputs, or why there is nothing to compare yet (`note`)."""

    mode: str
    """The mode whose outputs were (are being) fetched."""
    reference: str
    """The mode it is compared against."""
    prompts: int
    """Prompts in the check."""
    running: bool = False
    """True while the outputs are fetched."""
    check: GreedyCheck | None = None
    """The comparison, once there is one."""
    note: str = ""
    """What happened instead of a comparison (reference outputs stored, none stored yet, a failure)."""


@dataclass(frozen=True)
class Notice:
    """Something to tell the user once (a toast), e.g. ready, crashed, sweep done, a refused action."""

    text: str
    severity: Literal["information", "warning", "error"] = "information"
    bell: bool = False
    """Ring the terminal bell (ready, crash, sweep done), if the user's config allows it."""


TunePhase = Literal["running", "done", "cancelled", "failed"]
"""Where a tune started from a viewer is."""


@dataclass(frozen=True)
class TuneEntry:
    """A `[tune.NAME]` entry of the config, as a viewer offers it to start."""

    name: str
    mode: str
    """The speculative mode whose draft settings are tuned."""
    baseline: str
    space: str
    settings: int = 0
    """Settings the engine accepts (measured, with the baseline, in every pass)."""
    levels: tuple[int, ...] = ()
    repeats: int = 0
    max_restarts: int = 0
    """Server restarts at most: the full grid, (settings + baseline) x repeats; the drop rule saves some."""
    problem: str = ""
    """Why this entry cannot run (an invalid space, levels...); empty when it can."""


@dataclass(frozen=True)
class TuneProgress:
    """A running (or just finished) tune: emitted after every step (a restart, a level, a drop, the end)."""

    name: str
    phase: TunePhase
    line: str
    """The latest step, in a sentence."""
    setting: str
    """The setting (or `baseline`) being measured; empty between restarts and at the end."""
    repeat: int
    """Its pass, from 0."""
    repeats: int
    levels_done: int
    """Levels of the current setting's restart done..."""
    levels_total: int
    """...of these."""
    restarts: int
    """Restarts made so far (across resumes)..."""
    full_grid_restarts: int
    """...of the full grid's."""
    dropped: tuple[str, ...]
    """Settings the drop rule took out of later passes."""
    eta_s: float | None
    """The whole tune's seconds left (None when unknown or finished)."""
    report: Mapping[str, Any]
    """The result so far (`specdash.tune.report.report`: policy, measured points), for the table and chart."""
    resume: str
    """The command line that continues this tune."""
    eta_restarts: int = 0
    """Restarts left in `eta_s`."""
    after: str = ""
    """After a cancel: what runs now, in a sentence."""


@dataclass(frozen=True)
class ServerLoad:
    """What the server's own periodic lines say about its load (at most one a second): the fleet row's numbers."""

    tok_s: float | None = None
    """Generation throughput the engine reports (tokens/s)."""
    running: int | None = None
    """Requests running."""
    accept_len: float | None = None
    """Speculative acceptance length (tokens per verify step), when the engine reports one."""
    at: float = 0.0
    """When (the session's clock)."""


SessionEvent = (
    ServerStatus
    | LogBatch
    | ModesChanged
    | GpuStats
    | BenchTick
    | BenchUpdate
    | GreedyUpdate
    | Notice
    | TuneProgress
    | ServerLoad
)
"""Everything a session emits besides connection events."""
