"""Runs a speculation tune on a `RemoteSession`: one restart per (setting, repeat), a journal, the policy.

The search logic (space, order, drop rule, ETA, policy) is `specdash.core.tune`; this module turns it
into server restarts and sweeps through the session's lifecycle and sweep code (the same path as
`specdash bench HOST --mode A,B`), and keeps a journal so that a killed tune resumes.

**Journal.** `data_dir()/tunes/NAME.jsonl`, one JSON object per line, appended and flushed as things
happen: a `header` (what is tuned), then `level` (a finished level's tok/s), `startup` (a restart's
seconds to ready), `crash` (a setting that crashed or never became ready, with the reason and the level)
and `verify` records. `--resume` replays it: a (candidate, repeat, level) already in it is never measured
again, a restart cut off mid-way runs only its missing levels. Every request sample is in the store as
in any sweep, with its run id.

**Modes.** A candidate is the base mode with the engine's draft flags replaced (`NAME@s3-k4-d8`); the
baseline is the configured baseline mode, measured like a candidate in every pass. Every restart runs
with its own engine seed (`seeded_args`: SGLang `--random-seed`, vLLM `--seed`, derived from the
candidate and the pass, so a resumed restart gets the same one): repeats are independent samples.

**Blocks.** In passes 2..R a restart first measures its missing levels, then, on the same server, its
contended levels again in blocks until each reaches the precision target or `max_blocks`
(`specdash.core.tune`: contention and the precision target). A `level` record carries its `block`.

**Failures.** A crash of a candidate (the server dies, or never becomes ready) is a result: recorded
with the crash line and the level in flight, never repeated, and the tune goes on. Any other failure (the
probe cannot start on an overloaded client, a stop fails) is not the setting's: the tune stops there and
`--resume` goes on. A cut link pauses
the level as in a sweep (`on_link_loss = "pause"`); an SSH failure between levels waits for the
connection to come back (up to `link_wait_s`) and runs the restart again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from specdash.bench.prompts import PromptSet, load_prompts
from specdash.bench.sse import default_endpoint
from specdash.bench.sweep import SweepConfig
from specdash.config import Config, ModeConfig, TuneConfig
from specdash.core import tune as core
from specdash.core.events import BenchUpdate, ServerStatus, TuneEntry, TunePhase, TuneProgress
from specdash.core.spec_export import vllm_mode_args
from specdash.engines.spec_settings import SGLANG_DRAFT_FLAGS, SpecSetting, sglang_flags, strip_flags
from specdash.errors import SpecdashError, UsageError
from specdash.phases import Phase
from specdash.remote.events import ConnectionState
from specdash.server.remote_session import RemoteSession

JOURNAL_VERSION = 2
SEED_FLAGS = {"sglang": "--random-seed", "vllm": "--seed"}
"""The engine's own seed flag (SGLang's server_args `random_seed`, vLLM's EngineArgs `seed`)."""


def restart_seed(candidate: str, repeat: int) -> int:
    """A stable seed per (candidate, pass): distinct restarts draw independently, a resumed one repeats."""
    import hashlib

    return int.from_bytes(hashlib.sha256(f"{candidate}|{repeat}".encode()).digest()[:4], "big") % (1 << 30)


def seeded_args(engine: str, args: tuple[str, ...], seed: int) -> tuple[str, ...]:
    """`args` with the engine's seed flag set to `seed` (an existing one replaced); unchanged for others."""
    flag = SEED_FLAGS.get(engine)
    if flag is None:
        return args
    return (*strip_flags(args, (flag,)), flag, str(seed))


@dataclass(frozen=True)
class TunePlan:
    """What a tune measures (the journal's header)."""

    name: str
    """The tune's name (its journal file)."""
    host: str
    """The host's name."""
    base_mode: str
    """The speculative mode whose draft settings are tuned."""
    baseline_mode: str
    """The reference mode (no speculation)."""
    engine: str
    """`sglang` or `vllm`."""
    space: str
    """The `--space` text."""
    levels: tuple[int, ...]
    """Concurrency levels, ascending."""
    repeats: int
    """Passes (pass 1 measures every setting; the others only those still in contention)."""
    order: tuple[SpecSetting, ...]
    """Settings to measure, in convergence order."""
    skipped: tuple[core.Skipped, ...]
    """Points of the space not measured, with reasons."""
    noise_floor: float = core.NOISE_FLOOR
    """Smallest relative spread of a level."""
    precision: float = core.PRECISION
    """Target relative standard error of a contended level (passes 2..R)."""
    max_blocks: int = core.MAX_BLOCKS
    """Most blocks per contended level and restart."""

    def header(self) -> dict[str, Any]:
        """The journal header (what must match on `--resume`)."""
        return {
            "type": "header",
            "version": JOURNAL_VERSION,
            "name": self.name,
            "host": self.host,
            "base_mode": self.base_mode,
            "baseline_mode": self.baseline_mode,
            "space": self.space,
            "levels": list(self.levels),
            "repeats": self.repeats,
            "noise_floor": self.noise_floor,
            "precision": self.precision,
            "max_blocks": self.max_blocks,
            "settings": [s.label for s in self.order],
        }

    @property
    def full_grid_restarts(self) -> int:
        """Restarts of the same tune without early stopping: (settings + baseline) x repeats."""
        return (len(self.order) + 1) * self.repeats


def build_plan(
    cfg: Config,
    *,
    host: str,
    mode: str,
    baseline: str,
    space: str,
    levels: tuple[int, ...],
    repeats: int,
    name: str | None = None,
    noise_floor: float = core.NOISE_FLOOR,
    precision: float = core.PRECISION,
    max_blocks: int = core.MAX_BLOCKS,
) -> TunePlan:
    """The one way to build a plan (`specdash tune`'s flags, a `[tune.NAME]` entry in the dashboard).

    Raises:
        UsageError: an unknown mode, axes the engine does not have, a space it refuses entirely, a bad name.
    """
    import hashlib

    from specdash.core.spec_export import vllm_speculative_config
    from specdash.engines.spec_settings import Verdict, check_sglang, check_vllm

    base = cfg.mode(mode)
    cfg.mode(baseline)
    axes, points = core.parse_space(space) if space else ({}, [])
    if base.engine == "sglang":
        if axes and not set(axes) <= {"steps", "topk", "draft"}:
            raise UsageError(f"--space: mode {base.name} is SGLang; its axes are steps, topk and draft")

        def check(s: SpecSetting) -> Verdict:
            return check_sglang(s)
    else:
        if axes and not set(axes) <= {"k", "lookup_max"}:
            raise UsageError(f"--space: mode {base.name} is vLLM; its axes are k and lookup_max")
        method = str(vllm_speculative_config(base.args).get("method", ""))
        if not method:
            raise UsageError(f"mode {base.name} has no --speculative-config JSON with a method to tune")

        def check(s: SpecSetting) -> Verdict:
            return check_vllm(s, method)

    keep, skipped = core.runnable(points, check)
    if space and not keep:
        raise UsageError("--space: the engine refuses every setting in it: " + "; ".join(s.reason for s in skipped))
    digest = hashlib.sha256(f"{host}|{mode}|{space}|{levels}|{repeats}".encode()).hexdigest()[:8]
    name = name or f"{host}-{mode}-{digest}"
    if not all(ch.isalnum() or ch in "-_.@" for ch in name):
        raise UsageError(f"--name {name!r}: use letters, digits and - _ . @")
    return TunePlan(
        name=name,
        host=host,
        base_mode=base.name,
        baseline_mode=baseline,
        engine=base.engine,
        space=space,
        levels=levels,
        repeats=repeats,
        order=tuple(core.convergence_order(keep)),
        skipped=tuple(skipped),
        noise_floor=noise_floor,
        precision=precision,
        max_blocks=max_blocks,
    )


def plan_for_entry(cfg: Config, entry: TuneConfig, host: str) -> TunePlan:
    """The plan of a `[tune.NAME]` entry on `host`, as `specdash tune HOST --tune NAME` builds it (so the
    journal is the same one and `--resume` continues a tune started in the dashboard)."""
    from specdash.core.levels import parse_levels

    try:
        levels = parse_levels(entry.levels or core.DEFAULT_LEVELS)
    except UsageError as exc:
        raise UsageError(f"[tune.{entry.name}] levels: {exc.message}") from exc
    return build_plan(
        cfg,
        host=host,
        mode=entry.mode,
        baseline=entry.baseline,
        space=entry.space,
        levels=levels,
        repeats=entry.repeats or core.DEFAULT_REPEATS,
        name=entry.name,
    )


def candidate_mode(base: ModeConfig, setting: SpecSetting) -> ModeConfig:
    """The base mode with its draft settings replaced by `setting`."""
    if base.engine == "sglang":
        args = (*strip_flags(base.args, SGLANG_DRAFT_FLAGS), *sglang_flags(setting))
    else:
        args = vllm_mode_args(base.args, setting)
    return dataclasses.replace(
        base, name=f"{base.name}@{setting.label}", args=args, description=f"tune of {base.name}: {setting.label}"
    )


@dataclass
class TuneState:
    """Everything measured so far (rebuilt from the journal on resume)."""

    values: dict[str, dict[int, dict[int, dict[int, float]]]] = field(default_factory=dict)
    """candidate -> repeat -> level -> block -> tok/s."""
    crashes: dict[str, dict[str, Any]] = field(default_factory=dict)
    """candidate -> the crash record."""
    startups: list[float] = field(default_factory=list)
    """Seconds each restart of this tune took to become ready."""
    level_s: list[float] = field(default_factory=list)
    """Seconds each measured level took."""
    restarts: int = 0
    """Restarts this tune made (across resumes)."""
    verify: dict[str, Any] | None = None
    """The last verification record."""
    done: set[tuple[str, int]] = field(default_factory=set)
    """(candidate, repeat) restarts that finished their levels and blocks."""

    def measured(self) -> dict[str, dict[int, list[float]]]:
        """candidate -> level -> values over repeats."""
        out: dict[str, dict[int, list[float]]] = {}
        for name, repeats in self.values.items():
            for levels in repeats.values():
                for c, blocks in levels.items():
                    out.setdefault(name, {}).setdefault(c, []).extend(blocks.values())
        return out

    def blocks(self, candidate: str, repeat: int, c: int) -> int:
        """Blocks measured at (candidate, repeat, level)."""
        return len(self.values.get(candidate, {}).get(repeat, {}).get(c, {}))

    def apply(self, record: dict[str, Any]) -> None:
        """Fold one journal record in."""
        kind = record.get("type")
        if kind == "level":
            levels = self.values.setdefault(record["candidate"], {}).setdefault(int(record["repeat"]), {})
            levels.setdefault(int(record["c"]), {})[int(record.get("block", 0))] = float(record["tok_s"])
            if record.get("seconds"):
                self.level_s.append(float(record["seconds"]))
        elif kind == "crash":
            self.crashes[record["candidate"]] = record
        elif kind == "startup":
            self.restarts += 1
            if record.get("seconds") is not None:
                self.startups.append(float(record["seconds"]))
        elif kind == "verify":
            self.verify = record
        elif kind == "done":
            self.done.add((record["candidate"], int(record["repeat"])))


class Journal:
    """The append-only JSONL journal of one tune."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: TextIO | None = None

    @staticmethod
    def default_dir() -> Path:
        """`data_dir()/tunes`."""
        from specdash.paths import data_dir

        return data_dir() / "tunes"

    def read(self) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """The header and the records (a torn last line from a SIGKILL is ignored)."""
        if not self.path.exists():
            return None, []
        header: dict[str, Any] | None = None
        records: list[dict[str, Any]] = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if record.get("type") == "header":
                header = record
            else:
                records.append(record)
        return header, records

    def write(self, record: dict[str, Any]) -> None:
        """Append and flush one record."""
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8")
        self._file.write(json.dumps(record, default=str) + "\n")
        self._file.flush()

    def close(self) -> None:
        """Close the file."""
        if self._file is not None:
            self._file.close()
            self._file = None


def open_journal(plan: TunePlan, path: Path, resume: bool) -> tuple[Journal, TuneState]:
    """The journal for `plan` and the state replayed from it.

    Raises:
        UsageError: a journal exists without `--resume`, or `--resume` finds one for another tune.
    """
    journal = Journal(path)
    header, records = journal.read()
    state = TuneState()
    if header is not None and not resume:
        raise UsageError(f"tune {plan.name!r} has a journal at {path}; add --resume to go on, or pick another --name")
    if resume and header is not None:
        want = plan.header()
        for key in ("base_mode", "baseline_mode", "space", "levels", "repeats", "host"):
            if header.get(key) != want[key]:
                raise UsageError(f"--resume: the journal {path} is for {key} = {header.get(key)!r}, not {want[key]!r}")
        for record in records:
            state.apply(record)
    if header is None:
        journal.write(plan.header())
    return journal, state


@dataclass(frozen=True)
class TuneEvent:
    """Progress for the CLI's live lines."""

    text: str
    """One line."""
    eta_s: float | None = None
    """Estimated seconds left of the whole tune."""


@dataclass(frozen=True)
class TuneResult:
    """The finished (or stopped) tune."""

    plan: TunePlan
    state: TuneState
    points: dict[str, dict[int, core.Point]]
    policy: core.Policy
    dropped: tuple[str, ...]
    """Settings the drop rule took out of later passes."""
    restarts: int
    """Restarts made."""
    aborted: str | None = None
    """Why the tune stopped early, if it did."""

    @property
    def restarts_saved(self) -> int:
        """Full grid's restarts minus the restarts made (crashed settings are not repeated either)."""
        return max(0, self.plan.full_grid_restarts - self.restarts)


class TuneRunner:
    """Runs a `TunePlan` on a running `RemoteSession`."""

    def __init__(
        self,
        session: RemoteSession,
        plan: TunePlan,
        journal: Journal,
        state: TuneState,
        sweep_config: SweepConfig,
        prompts: PromptSet,
        on_event: Callable[[TuneEvent], None] | None = None,
        link_wait_s: float = 600.0,
        history_startup_s: tuple[float, ...] = (),
    ) -> None:
        self.session = session
        self.plan = plan
        self.journal = journal
        self.state = state
        self.sweep_config = sweep_config
        self.prompts = prompts
        self.on_event = on_event or (lambda _e: None)
        self.link_wait_s = link_wait_s
        self.history_startup_s = history_startup_s
        base = session.config.mode(plan.base_mode)
        self.modes: dict[str, str] = {core.BASELINE: plan.baseline_mode}
        extra: dict[str, ModeConfig] = {}
        for setting in plan.order:
            mode = candidate_mode(base, setting)
            extra[mode.name] = mode
            self.modes[setting.label] = mode.name
        session.config = dataclasses.replace(session.config, modes={**session.config.modes, **extra})
        session.hide_modes(extra)  # one config mode per setting: not listed unless it is the one running
        self._base_args = {name: session.config.mode(name).args for name in self.modes.values()}
        self._listening: tuple[str, str, int] | None = None  # (candidate, mode, repeat) being measured
        self.current: tuple[str, int] | None = None
        """(candidate, repeat) being measured now, from the moment its restart is requested."""
        self._out: set[str] = set()  # dropped at the end of a pass: never measured again, so never cleared
        self._blocks: dict[int, int] = {}  # level -> the block the sweep in flight measures
        self._t_request = 0.0
        self._t_last = 0.0
        self._ready_seen = False
        session.subscribe(self._listen)

    # -- events from the session -------------------------------------------------------------------

    def _listen(self, event: object) -> None:
        target = self._listening
        if target is None:
            return
        candidate, mode, repeat = target
        if isinstance(event, ServerStatus) and event.mode == mode and event.phase is Phase.READY:
            if not self._ready_seen:
                self._ready_seen = True
                now = time.monotonic()
                self._t_last = now
                self.journal.write({"type": "startup", "candidate": candidate, "repeat": repeat,
                                    "seconds": round(now - self._t_request, 3)})  # fmt: skip
                self.state.apply({"type": "startup", "seconds": now - self._t_request})
        elif isinstance(event, BenchUpdate):
            done = self.state.values.get(candidate, {}).get(repeat, {})
            for row in event.rows:
                block = self._blocks.get(row.concurrency)
                if (
                    row.mode == mode
                    and row.status == "done"
                    and row.tok_s is not None
                    and block is not None
                    and block not in done.get(row.concurrency, {})
                ):
                    now = time.monotonic()
                    record = {"type": "level", "candidate": candidate, "repeat": repeat, "c": row.concurrency,
                              "block": block, "tok_s": row.tok_s, "seconds": round(now - self._t_last, 3)}  # fmt: skip
                    self._t_last = now
                    self.journal.write(record)
                    self.state.apply(record)
                    tag = f" block {block + 1}" if block else ""
                    self._progress(f"[{candidate} #{repeat + 1} C={row.concurrency}{tag}] {row.tok_s:.1f} tok/s")

    # -- the search --------------------------------------------------------------------------------

    def _points(self) -> dict[str, dict[int, core.Point]]:
        return core.points(self.state.measured(), self.plan.noise_floor)

    def _dropped(self) -> list[str]:
        """Settings out of contention: dropped at the end of an earlier pass (a setting dropped once stays
        dropped: its later repeats are not run, so the result must still name it), or dominated now."""
        pts = self._points()
        return [s.label for s in self.plan.order if s.label in self._out or core.dominated(s.label, pts)]

    def _pass_candidates(self, repeat: int) -> list[str]:
        labels = [s.label for s in self.plan.order]
        if repeat == 0:
            return [core.BASELINE, *labels]
        dropped = set(self._dropped())
        return [core.BASELINE, *(x for x in labels if x not in dropped and x not in self.state.crashes)]

    def _missing(self, candidate: str, repeat: int) -> list[int]:
        done = self.state.values.get(candidate, {}).get(repeat, {})
        return [c for c in self.plan.levels if not done.get(c)]

    def _active(self) -> list[str]:
        dropped = set(self._dropped())
        labels = [s.label for s in self.plan.order if s.label not in dropped and s.label not in self.state.crashes]
        return [core.BASELINE, *labels]

    def _needs_blocks(self, candidate: str, repeat: int) -> list[int]:
        """Contended levels of `candidate` short of the precision target (passes 2..R only)."""
        if repeat == 0:
            return []
        pts = self._points()
        active = self._active()
        out = []
        for c in self.plan.levels:
            if self.state.blocks(candidate, repeat, c) >= self.plan.max_blocks:
                continue
            rivals = core.contenders(pts, c, active)
            if len(rivals) > 1 and candidate in rivals and pts[candidate][c].rel_se > self.plan.precision:
                out.append(c)
        return out

    def eta(self, repeat: int, index: int, order: list[str]) -> core.Eta:
        """Time left: the rest of this pass, plus later passes at the current contenders."""
        restarts = 0
        levels = 0
        for name in order[index:]:
            missing = self._missing(name, repeat)
            if missing and name not in self.state.crashes:
                restarts += 1
                levels += len(missing)
        contenders = len(self._pass_candidates(1)) if self.plan.repeats > 1 else 0
        later = max(0, self.plan.repeats - 1 - repeat) * contenders
        restarts += later
        levels += later * len(self.plan.levels)
        return core.estimate_eta(restarts, levels, [*self.history_startup_s, *self.state.startups], self.state.level_s)

    def _progress(self, text: str, eta: core.Eta | None = None) -> None:
        self.on_event(TuneEvent(text, eta.seconds if eta else None))

    async def run(self) -> TuneResult:
        """Every pass; returns the result (the journal has it all as it happened)."""
        aborted: str | None = None
        try:
            for repeat in range(self.plan.repeats):
                order = self._pass_candidates(repeat)
                for index, candidate in enumerate(order):
                    if candidate in self.state.crashes or (candidate, repeat) in self.state.done:
                        continue
                    missing = self._missing(candidate, repeat) or self._needs_blocks(candidate, repeat)
                    if not missing:
                        continue
                    eta = self.eta(repeat, index, order)
                    self.current = (candidate, repeat)
                    self._progress(
                        f"pass {repeat + 1}/{self.plan.repeats}: {candidate} ({index + 1}/{len(order)}), "
                        f"levels {','.join(map(str, missing))}",
                        eta,
                    )
                    await self._measure(candidate, repeat, missing)
                if repeat + 1 < self.plan.repeats:
                    dropped = self._dropped()
                    self._out.update(dropped)
                    if dropped:
                        self._progress(f"after pass {repeat + 1}: dropped {', '.join(dropped)} (drop rule)")
        except asyncio.CancelledError:
            raise
        except SpecdashError as exc:
            aborted = exc.message
        finally:
            self._listening = None
            self.current = None
            self.session.unsubscribe(self._listen)
        return self.snapshot(aborted)

    def snapshot(self, aborted: str | None = None) -> TuneResult:
        """The result so far (the policy of what is measured now; the final one at the end of `run`)."""
        pts = self._points()
        out = tuple(self._dropped())
        policy = core.build_policy(pts, out) if core.BASELINE in pts else core.build_policy({core.BASELINE: {}})
        return TuneResult(self.plan, self.state, pts, policy, out, self.state.restarts, aborted)

    async def _measure(self, candidate: str, repeat: int, levels: list[int]) -> None:
        mode = self.modes[candidate]
        cfg = self.session.config.mode(mode)
        seeded = dataclasses.replace(
            cfg, args=seeded_args(cfg.engine, self._base_args[mode], restart_seed(candidate, repeat))
        )
        self.session.config = dataclasses.replace(
            self.session.config, modes={**self.session.config.modes, mode: seeded}
        )
        for _attempt in range(3):
            self._listening = (candidate, mode, repeat)
            self._ready_seen = False
            self._t_request = time.monotonic()
            try:
                while levels:  # the missing levels, then blocks of the contended ones on the same server
                    self._blocks = {c: self.state.blocks(candidate, repeat, c) for c in levels}
                    await self.session.sweep([mode], levels, config=self.sweep_config, prompts=self.prompts)
                    levels = self._needs_blocks(candidate, repeat)
                    if levels:
                        self._progress(f"[{candidate} #{repeat + 1}] contended at C={','.join(map(str, levels))}: "
                                       "another block")  # fmt: skip
                self._finished(candidate, repeat)
                return
            except SpecdashError as exc:
                status = self.session.status
                if self.session.host.state is not ConnectionState.CONNECTED:
                    self._progress(f"[{candidate}] link lost ({exc.message}); waiting for it")
                    await self._wait_link()
                    levels = self._missing(candidate, repeat) or self._needs_blocks(candidate, repeat)
                    if not levels:
                        self._finished(candidate, repeat)
                        return
                    continue
                if status.crash is None and status.phase not in (Phase.CRASHED, Phase.EXITED):
                    # Not the server's fault (the probe could not start, a stop failed...): the setting has
                    # not failed. Stop the tune; the journal keeps everything and --resume goes on from here.
                    raise SpecdashError(f"{candidate}: {exc.message} (run again with --resume)") from exc
                if not self._ready_seen:  # it was restarted but never became ready: still a restart
                    record = {"type": "startup", "candidate": candidate, "repeat": repeat, "seconds": None}
                    self.journal.write(record)
                    self.state.apply(record)
                crash = status.crash.reason if status.crash else exc.message
                done = self.state.values.get(candidate, {}).get(repeat, {})
                in_flight = next((c for c in levels if c not in done), None)
                record = {"type": "crash", "candidate": candidate, "repeat": repeat, "c": in_flight,
                          "reason": crash, "error": exc.message}  # fmt: skip
                self.journal.write(record)
                self.state.apply(record)
                self._progress(f"[{candidate}] crashed at C={in_flight}: {crash}")
                return
            finally:
                self._listening = None
                self._blocks = {}
        raise SpecdashError(f"{candidate}: the link kept failing; stopping the tune (run again with --resume)")

    def eta_now(self) -> core.Eta | None:
        """The whole tune's time left from where it is (None before it starts or after it ends)."""
        if self.current is None:
            return None
        candidate, repeat = self.current
        order = self._pass_candidates(repeat)
        return self.eta(repeat, order.index(candidate) if candidate in order else 0, order)

    def _finished(self, candidate: str, repeat: int) -> None:
        record = {"type": "done", "candidate": candidate, "repeat": repeat}
        self.journal.write(record)
        self.state.apply(record)

    async def _wait_link(self) -> None:
        deadline = time.monotonic() + self.link_wait_s
        while self.session.host.state is not ConnectionState.CONNECTED:
            if time.monotonic() > deadline:
                raise SpecdashError(f"link not back after {self.link_wait_s:g} s (run again with --resume)")
            await asyncio.sleep(0.5)


def resume_command(plan: TunePlan) -> str:
    """The command line that goes on with a tune of a `[tune.NAME]` entry (its journal has the same name)."""
    return f"specdash tune {plan.host} --tune {plan.name} --resume"


def tune_entries(cfg: Config, host: str) -> tuple[TuneEntry, ...]:
    """The config's `[tune.NAME]` entries as the dashboard offers them, each with its plan's size (or why it
    cannot run)."""
    out: list[TuneEntry] = []
    for entry in cfg.tunes.values():
        try:
            plan = plan_for_entry(cfg, entry, host)
        except SpecdashError as exc:
            out.append(TuneEntry(entry.name, entry.mode, entry.baseline, entry.space, problem=exc.message))
            continue
        out.append(
            TuneEntry(
                entry.name,
                plan.base_mode,
                plan.baseline_mode,
                plan.space,
                settings=len(plan.order),
                levels=plan.levels,
                repeats=plan.repeats,
                max_restarts=plan.full_grid_restarts,
            )
        )
    return tuple(out)


async def run_entry(session: RemoteSession, name: str, emit: Callable[[TuneProgress], None]) -> TuneResult:
    """Run the `[tune.NAME]` entry `name` on `session` (resuming its journal if there is one), reporting
    `TuneProgress` through `emit` after every step; the dashboard's way to tune (no verification: that is
    `specdash tune HOST --tune NAME --verify MODE`).

    Cancelling the task stops the tune: finished levels are in the journal, and `resume_command` goes on.

    Raises:
        SpecdashError: no such entry, or its plan is invalid (nothing started).
    """
    from specdash.server.tune_report import report

    entry = session.config.tunes.get(name)
    if entry is None:
        known = ", ".join(sorted(session.config.tunes)) or "none"
        raise SpecdashError(f"no [tune.{name}] in the config (known: {known})")
    plan = plan_for_entry(session.config, entry, session.label)
    defaults = session.sweep_defaults
    settings = dataclasses.replace(defaults.settings, endpoint=default_endpoint(plan.engine))  # as the CLI's
    sweep = dataclasses.replace(defaults, settings=settings, progress_interval_s=1.0, on_link_loss="pause")
    journal, state = open_journal(plan, Journal.default_dir() / f"{plan.name}.jsonl", resume=True)
    records = session.store.startups(host=session.label, mode=plan.base_mode, limit=10) if session.store else []
    history = tuple(r.total_s for r in records if r.outcome == "ready" and r.total_s is not None)
    runner: TuneRunner | None = None
    line = ""

    def progress(phase: TunePhase, text: str = "", aborted: str | None = None) -> TuneProgress:
        assert runner is not None
        result = runner.snapshot(aborted)
        current = runner.current
        done = len(runner.state.values.get(current[0], {}).get(current[1], {})) if current else 0
        eta = runner.eta_now()
        return TuneProgress(
            name=plan.name,
            phase=phase,
            line=text,
            setting=current[0] if current else "",
            repeat=current[1] if current else 0,
            repeats=plan.repeats,
            levels_done=done,
            levels_total=len(plan.levels),
            restarts=runner.state.restarts,
            full_grid_restarts=plan.full_grid_restarts,
            dropped=result.dropped,
            eta_s=eta.seconds if eta else None,
            report=report(plan, result),
            resume=resume_command(plan),
        )

    def on_event(event: TuneEvent) -> None:
        nonlocal line
        line = event.text
        emit(progress("running", line))

    try:
        runner = TuneRunner(session, plan, journal, state, sweep, load_prompts("chat"), on_event,
                            link_wait_s=session.sweep_defaults.link_wait_s, history_startup_s=history)  # fmt: skip
        emit(progress("running", f"tune {plan.name}: {len(plan.order)} settings x {len(plan.levels)} levels"))
        try:
            result = await runner.run()
        except asyncio.CancelledError:
            emit(progress("cancelled", f"cancelled; finished results kept ({resume_command(plan)} continues)"))
            raise
        if result.aborted:
            emit(progress("failed", f"stopped: {result.aborted}", result.aborted))
        else:
            emit(progress("done", f"done: {result.restarts} restarts of {plan.full_grid_restarts} for the full grid"))
        return result
    finally:
        journal.close()
