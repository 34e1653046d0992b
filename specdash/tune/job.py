"""One tune on a session, from its plan to a verified, exported policy: the one path that `specdash tune` (the
CLI) and the dashboard's T view (`DashboardTunes`) both run.

`TuneJob` writes the tune's setup once (the sweep's configuration with the engine's endpoint, the prompts, the
journal and the state replayed from it, the host's startup history for the ETA, the runner), holds the
session's claim while it runs (`RemoteSession.claim_for_tune`: the viewers' server actions are refused), and
ends with the engine's own flags for the policy (`specdash.core.spec_export`), the verification of the tuned
mode on the live server (a ramp, then a long hold above the threshold) and, when asked, the tuned mode
written into the config file.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from specdash.bench.prompts import load_prompts
from specdash.bench.sse import Endpoint, default_endpoint
from specdash.bench.sweep import SweepConfig
from specdash.config import Config, ModeConfig, load
from specdash.core import tune as core
from specdash.core.eta import SweepEstimate, tune_estimate
from specdash.core.events import Notice, SessionEvent, TuneEntry, TunePhase, TuneProgress
from specdash.core.spec_export import Export, exports, mode_toml, simulated
from specdash.engines.registry import names
from specdash.errors import SpecdashError, UsageError
from specdash.phases import Phase
from specdash.server.launch import paste_command
from specdash.server.remote_session import RemoteSession
from specdash.tune.journal import Journal, open_journal
from specdash.tune.plan import TunePlan, plan_for_entry, resume_command, tune_entries
from specdash.tune.report import report
from specdash.tune.runner import TuneEvent, TuneResult, TuneRunner, result_of


@dataclass(frozen=True)
class TuneOptions:
    """How a tune measures and how it ends (the CLI's flags; the dashboard takes the defaults)."""

    duration_s: float | None = None
    """Seconds per level (None: the session's sweep default)."""
    requests_per_level: int | None = None
    """Requests per level instead of a duration."""
    output_len: int | None = None
    """Tokens per response (None: the session's default)."""
    endpoint: Endpoint | None = None
    """The probe's endpoint (None: the engine's, `bench.sse.default_endpoint`)."""
    prompts: str = "chat"
    """`chat`, `code` or a JSONL file."""
    journal_dir: Path | None = None
    """Where journals go (None: `Journal.default_dir()`)."""
    resume: bool = False
    """Go on from an existing journal (without it, one is refused)."""
    verify: bool = True
    """Verify the exported mode at the end (unless the tune stopped early)."""
    verify_only: str | None = None
    """Measure nothing: only verify this mode against the journal's tune."""
    write_mode: str | None = None
    """Write the exported mode into the config as this name."""
    config_path: Path | None = None
    """The config file `write_mode` writes (None: the TOML is only returned)."""
    engine_version: str | None = None
    """Export only what this engine version accepts."""
    hold: float = 3.0
    """The verification's hold level runs this many levels long."""
    link_wait_s: float = 600.0
    """How long an SSH failure between levels may last before the tune stops."""


@dataclass
class TuneOutcome:
    """A tune's end: the result and everything printed or shown of it (`report` plus exports, verify, write)."""

    result: TuneResult
    out: dict[str, Any] = field(default_factory=dict)

    @property
    def unsafe(self) -> bool:
        """The verification crashed the tuned mode."""
        return bool(self.out.get("verify", {}).get("unsafe"))


def verified_export(base: ModeConfig, exported: Sequence[Export]) -> Export:
    """The form the tune verifies and writes: the dynamic one that `base`'s own launcher runs (the simulator
    takes its own disable flag, not SGLang's adaptive config), else the fixed one (`exported` is not empty)."""
    runs = "sim" if simulated(base) else base.engine
    return next((e for e in exported if e.kind == "dynamic" and e.engine == runs), exported[0])


class TuneJob:
    """See the module docstring. Built before anything runs: a bad journal or plan fails here."""

    def __init__(
        self,
        session: RemoteSession,
        plan: TunePlan,
        options: TuneOptions,
        on_event: Callable[[TuneEvent], None] | None = None,
    ) -> None:
        self.session = session
        self.plan = plan
        self.options = options
        defaults = session.sweep_defaults
        settings = dataclasses.replace(
            defaults.settings,
            endpoint=options.endpoint or default_endpoint(plan.engine),
            output_len=options.output_len or defaults.settings.output_len,
        )
        by_count = options.requests_per_level is not None
        self.sweep = dataclasses.replace(
            defaults,
            duration_s=None if by_count else (options.duration_s or defaults.duration_s),
            requests_per_level=options.requests_per_level if by_count else defaults.requests_per_level,
            settings=settings,
            progress_interval_s=1.0,
            on_link_loss="pause",
        )
        self.path = (options.journal_dir or Journal.default_dir()) / f"{plan.name}.jsonl"
        self.journal, self.state = open_journal(
            plan, self.path, resume=options.resume or options.verify_only is not None
        )
        if options.verify_only is not None and core.BASELINE not in self.state.measured():
            self.journal.close()
            raise UsageError(f"--verify: the journal {self.path} has no measured tune to verify against")
        self.runner = TuneRunner(
            session,
            plan,
            self.journal,
            self.state,
            self.sweep,
            load_prompts(options.prompts),
            on_event,
            link_wait_s=options.link_wait_s,
            history_startup_s=startup_history(session, plan),
        )

    def sweep_config(self) -> SweepConfig:
        """The levels' configuration (the engine's endpoint, one-second progress, pause on a cut link)."""
        return self.sweep

    async def run(self) -> TuneOutcome:
        """Run (or, with `verify_only`, only verify), export, verify, write; the journal has it all."""
        try:
            with self.session.claim_for_tune(self.plan.name):
                if self.options.verify_only is None:
                    result = await self.runner.run()
                else:
                    result = result_of(self.plan, self.state)
                outcome = TuneOutcome(result, report(self.plan, result))
                await self._finish(outcome)
                return outcome
        finally:
            self.journal.close()

    async def _finish(self, outcome: TuneOutcome) -> None:
        result, out, options = outcome.result, outcome.out, self.options
        base = self.session.config.mode(self.plan.base_mode)
        settings = {s.label: s for s in self.plan.order}
        exported = exports(base, result.policy, settings, simulated(base), options.engine_version)
        hc = self.session.host_config
        out["exports"] = [{**e.to_json(), "command": paste_command(base, hc, e.args)} for e in exported]
        if not exported:
            return
        chosen = verified_export(base, exported)
        if options.write_mode:
            out["write_mode"] = write_mode(options.config_path, self.session.config, options.write_mode, base, chosen)
        mode = options.verify_only
        if mode is None and options.verify and result.aborted is None and result.speculative_measured:
            mode = f"{self.plan.base_mode}-tuned"
            tuned = dataclasses.replace(base, name=mode, args=chosen.args, description=f"tuned {chosen.kind}")
            self.session.config = dataclasses.replace(
                self.session.config, modes={**self.session.config.modes, mode: tuned}
            )
        if mode is not None:
            out["verify"] = await self._verify(result, mode)

    async def _verify(self, result: TuneResult, mode: str) -> dict[str, Any]:
        """The tuned mode on a restarted server: the tune's levels and the threshold (a ramp), then a long hold
        just above the threshold. A crash is recorded with its line and level and makes the policy unsafe."""
        session = self.session
        session.config.mode(mode)
        policy = result.policy
        ramp = core.verify_ramp(result.plan.levels, policy.disable_above)
        hold = (policy.disable_above + 1) if policy.disable_above else ramp[-1]
        self.runner.on_event(TuneEvent(f"verify {mode}: ramp {','.join(map(str, ramp))}, hold at C={hold}"))
        measured: dict[int, float] = {}
        crash: dict[str, Any] | None = None
        try:
            for c in ramp:  # one level per call: the levels before a crash are known, and the crash's level
                got = await session.sweep([mode], [c], config=self.sweep, prompts=self.runner.prompts, quiet=True)
                measured.update(_done(got.get(mode)))
            long = hold_level(self.sweep, self.options.hold)
            held = _done(
                (await session.sweep([mode], [hold], config=long, prompts=self.runner.prompts, quiet=True)).get(mode)
            )
            if hold in held:
                measured[hold] = min(held[hold], measured.get(hold, held[hold]))
        except asyncio.CancelledError:
            status = session.status
            ready = status.mode == mode and status.phase is Phase.READY
            await self.runner.settle_cancel(None if ready else mode)
            raise
        except SpecdashError as exc:
            status = session.status
            level = next((c for c in (*ramp, hold) if c not in measured), None)
            crash = {"line": status.crash.reason if status.crash else exc.message, "level": level, "error": exc.message}
        fixed = result.points.get(policy.fixed) if policy.fixed else None
        checks = core.verify_levels(
            measured, (*ramp,), fixed, result.points.get(core.BASELINE, {}), result.plan.noise_floor
        )
        worse = [v.concurrency for v in checks if v.ok is False]
        record = {
            "type": "verify",
            "mode": mode,
            "ramp": list(ramp),
            "hold": hold,
            "levels": [v.to_json() for v in checks],
            "crash": crash,
            "worse_at": worse,
            "unsafe": crash is not None,
            "ok": crash is None and not worse,
        }
        self.journal.write(record)
        self.state.apply(record)
        return record

    def progress(self, phase: TunePhase, text: str = "", aborted: str | None = None) -> TuneProgress:
        """The tune's state for a viewer (the dashboard's Tune view), after every step."""
        runner = self.runner
        result = runner.snapshot(aborted)
        current = runner.current
        done = len(runner.state.values.get(current[0], {}).get(current[1], {})) if current else 0
        eta = runner.eta_now()
        return TuneProgress(
            name=self.plan.name,
            phase=phase,
            line=text,
            setting=current[0] if current else "",
            repeat=current[1] if current else 0,
            repeats=self.plan.repeats,
            levels_done=done,
            levels_total=len(self.plan.levels),
            restarts=runner.state.restarts,
            full_grid_restarts=self.plan.full_grid_restarts,
            dropped=result.dropped,
            eta_s=eta.seconds if eta else None,
            eta_restarts=eta.restarts_left if eta else 0,
            report=report(self.plan, result),
            resume=resume_command(self.plan),
            after=runner.after,
        )


def hold_level(sweep: SweepConfig, hold: float) -> SweepConfig:
    """The verification's hold: `hold` levels long, counted as the tune counts its levels (seconds, or
    requests when the tune was given `--requests-per-level`); 30 s a level when it set neither."""
    if sweep.requests_per_level and not sweep.duration_s:
        return dataclasses.replace(sweep, requests_per_level=max(1, math.ceil(sweep.requests_per_level * hold)))
    return dataclasses.replace(sweep, duration_s=(sweep.duration_s or 30.0) * hold, requests_per_level=None)


def _done(result: Any) -> dict[int, float]:
    """C -> tok/s of the finished levels of one mode's `SweepResult` (None: nothing)."""
    if result is None:
        return {}
    return {lv.concurrency: lv.stats.output_tok_s for lv in result.levels if lv.status == "done"}


def startup_history(session: RemoteSession, plan: TunePlan) -> tuple[float, ...]:
    """Seconds to ready of the base mode's last ten launches on this host that became ready (the ETA's)."""
    records = session.store.startups(host=session.label, mode=plan.base_mode, limit=10) if session.store else []
    return tuple(r.total_s for r in records if r.outcome == "ready" and r.total_s is not None)


def write_mode(path: Path | None, cfg: Config, name: str, base: ModeConfig, export: Export) -> dict[str, Any]:
    """Append the tuned mode `name` to the config file at `path` (validated before it replaces the old one);
    with no file, only return its TOML.

    Raises:
        UsageError: a mode of that name exists, or the file would no longer be a valid config.
    """
    if name in cfg.modes:
        raise UsageError(f"--write-mode {name}: a mode of that name exists already")
    text = mode_toml(name, base, export)
    if path is None:
        return {"mode": name, "written": None, "toml": text}
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    new = old + ("\n" if old and not old.endswith("\n\n") else "") + text
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(new, encoding="utf-8")
    try:
        load(tmp, engines=names())  # the file must still be a valid config before it replaces the old one
    except UsageError:
        tmp.unlink()
        raise
    tmp.replace(path)
    return {"mode": name, "written": str(path), "toml": text}


class DashboardTunes:
    """The dashboard's tunes: the config's `[tune.NAME]` entries on one session, one at a time, each run as
    `specdash tune HOST --tune NAME --resume` runs it (verification included), reported as `TuneProgress`."""

    def __init__(self, session: RemoteSession) -> None:
        self.session = session
        self._task: asyncio.Task[Any] | None = None

    def entries(self) -> tuple[TuneEntry, ...]:
        """The config's `[tune.NAME]` entries, each with its size or why it cannot run."""
        return tune_entries(self.session.config, self.session.label)

    def estimate(self, entry: TuneEntry) -> SweepEstimate:
        """How long `entry` should take at most, from this host's recorded starts and the levels' length (the
        dashboard runs a tune with `TuneOptions`' defaults: the session's level duration, the default hold)."""
        session = self.session
        return tune_estimate(entry, session.ready_s, session.sweep_defaults.duration_s, TuneOptions().hold)

    async def run(self, name: str, emit: Callable[[SessionEvent], None]) -> None:
        """Run the entry `name` (resuming its journal), emitting `TuneProgress` after every step and a `Notice`
        at its end. Cancelling (`cancel`) starts nothing new: see `TuneRunner`.

        Raises:
            SpecdashError: no such entry, its plan is invalid, or a tune or sweep runs (nothing started).
        """
        session = self.session
        entry = session.config.tunes.get(name)
        if entry is None:
            known = ", ".join(sorted(session.config.tunes)) or "none"
            raise SpecdashError(f"no [tune.{name}] in the config (known: {known})")
        plan = plan_for_entry(session.config, entry, session.label)
        job: TuneJob | None = None

        def on_event(event: TuneEvent) -> None:
            if job is not None:
                emit(job.progress("running", event.text))

        job = TuneJob(session, plan, TuneOptions(resume=True, link_wait_s=session.sweep_defaults.link_wait_s), on_event)
        self._task = asyncio.current_task()
        emit(job.progress("running", f"tune {plan.name}: {len(plan.order)} settings x {len(plan.levels)} levels"))
        try:
            outcome = await job.run()
        except asyncio.CancelledError:
            after = job.runner.after or "nothing new started"
            emit(job.progress("cancelled", f"cancelled: {after}"))
            emit(Notice(f"tune {name} cancelled: {after}", "warning"))
            raise
        finally:
            self._task = None
        result = outcome.result
        if result.aborted:
            emit(job.progress("failed", f"stopped: {result.aborted}", result.aborted))
            emit(Notice(f"tune {name} stopped: {result.aborted}", "warning", bell=True))
            return
        verify = outcome.out.get("verify")
        checked = "" if verify is None else ("; verified" if verify["ok"] else "; verify: " + _verify_text(verify))
        done = f"done: {result.restarts} restarts of {plan.full_grid_restarts} for the full grid{checked}"
        progress = job.progress("done", done)
        emit(dataclasses.replace(progress, report={**progress.report, **outcome.out}))
        emit(Notice(f"tune {name} {done}", bell=True))

    async def cancel(self) -> None:
        """Stop the running tune: nothing new starts; finished levels stay in its journal."""
        task = self._task
        if task is not None and not task.done():
            task.cancel()


def _verify_text(verify: dict[str, Any]) -> str:
    if verify.get("crash"):
        return f"UNSAFE, crashed at C={verify['crash']['level']}"
    return f"worse at C = {verify['worse_at']}"


class Tunes(Protocol):
    """What the dashboard asks of its tunes (`DashboardTunes`; a stand-in in the UI's tests)."""

    def entries(self) -> Sequence[TuneEntry]:
        """The config's `[tune.NAME]` entries, each with its size or why it cannot run."""
        ...

    def estimate(self, entry: TuneEntry) -> SweepEstimate:
        """How long `entry` should take at most (`core.eta.tune_estimate`)."""
        ...

    async def run(self, name: str, emit: Callable[[SessionEvent], None]) -> None:
        """Run the entry `name`, emitting `TuneProgress` after every step; returns at its end."""
        ...

    async def cancel(self) -> None:
        """Stop the running tune: nothing new starts; finished levels stay in its journal."""
        ...
