"""Runs a tune's plan on a `RemoteSession`: one restart per (setting, pass), its levels, the journal, the result.

The search logic (space, order, drop rule, ETA, policy) is `specdash.core.tune`; this module turns it into
server restarts (`session.stop`, `session.start`, `session.wait_ready`; on a Slurm host each restart is a new
job, whose `startup` record keeps its queue wait and job id apart from the seconds to ready) and level sweeps
(`session.sweep`, one level per call: the runner learns each level's tok/s from what the call returns and
journals it at once, so a killed tune loses no finished level), through the same session code as
`specdash bench HOST --mode A,B`.

**Blocks.** In passes 2..R a restart first measures its missing levels, then, on the same server, its
contended levels again in blocks until each reaches the precision target or `max_blocks`
(`specdash.core.tune`: contention and the precision target). A `level` record carries its `block`.

**Failures.** A crash of a candidate (the server dies, or never becomes ready) is a result: recorded
with the crash line and the level in flight, never repeated, and the tune goes on. Any other failure (the
probe cannot start on an overloaded client, a stop fails) is not the setting's: the tune stops there and
`--resume` goes on. A cut link pauses the level as in a sweep (`on_link_loss = "pause"`); an SSH failure
between levels waits for the connection to come back (up to `link_wait_s`) and runs the restart again.

**Cancel.** Cancelling the task that runs `run()` starts nothing new: a restart in flight (the server of the
next setting launching, not yet measured) is stopped, a server being measured keeps running, and `after`
says which in a sentence.
"""

from __future__ import annotations

import asyncio
import dataclasses
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from specdash.bench.prompts import PromptSet
from specdash.bench.sweep import SweepConfig
from specdash.config import ModeConfig
from specdash.core import tune as core
from specdash.errors import SpecdashError
from specdash.phases import Phase
from specdash.remote.events import ConnectionState
from specdash.server.remote_session import RemoteSession
from specdash.tune.journal import Journal, TuneState
from specdash.tune.plan import TunePlan, candidate_mode, restart_seed, seeded_args


@dataclass(frozen=True)
class TuneEvent:
    """Progress for the CLI's live lines."""

    text: str
    """One line."""
    eta_s: float | None = None
    """Estimated seconds left of the whole tune."""


@dataclass(frozen=True)
class TuneResult:
    """The finished (or stopped) tune: everything is computed from the journal's state (`result_of`)."""

    plan: TunePlan
    state: TuneState
    points: dict[str, dict[int, core.Point]]
    policy: core.Policy
    dropped: tuple[str, ...]
    """Settings the drop rule took out of later passes (or that it would take out now)."""
    restarts: int
    """Restarts made."""
    aborted: str | None = None
    """Why the tune stopped early, if it did."""

    @property
    def restarts_saved(self) -> int:
        """Restarts the drop rule and crashes spared (`TuneState.restarts_saved`); never those a cancel skipped."""
        return self.state.restarts_saved(self.plan.repeats)

    @property
    def speculative_measured(self) -> bool:
        """Whether any speculative setting has a measured level (before that, the policy says nothing)."""
        return any(name != core.BASELINE and levels for name, levels in self.points.items())


def result_of(plan: TunePlan, state: TuneState, aborted: str | None = None) -> TuneResult:
    """The one way a tune's points, dropped settings and policy are computed (runner, `--verify`, the view)."""
    pts = core.points(state.measured(), plan.noise_floor)
    labels = [s.label for s in plan.order] or [name for name in pts if name != core.BASELINE]
    dropped = tuple(x for x in labels if x in state.dropped or core.dominated(x, pts))
    policy = core.build_policy(pts, dropped) if core.BASELINE in pts else core.build_policy({core.BASELINE: {}})
    return TuneResult(plan, state, pts, policy, dropped, state.restarts, aborted)


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
        self.current: tuple[str, int] | None = None
        """(candidate, repeat) being measured now, from the moment its restart is requested."""
        self.restarting = False
        """True from a restart's request until its server is ready (or failed)."""
        self.after = ""
        """After a cancel: what runs now, in a sentence."""

    # -- the search --------------------------------------------------------------------------------

    def _points(self) -> dict[str, dict[int, core.Point]]:
        return core.points(self.state.measured(), self.plan.noise_floor)

    def _dropped(self) -> list[str]:
        """Settings out of contention: dropped at the end of an earlier pass (a setting dropped once stays
        dropped: its later repeats are not run, so the result must still name it), or dominated now."""
        return list(result_of(self.plan, self.state).dropped)

    def _pass_candidates(self, repeat: int) -> list[str]:
        labels = [s.label for s in self.plan.order]
        if repeat == 0:
            return [core.BASELINE, *labels]
        dropped = set(self._dropped())
        return [core.BASELINE, *(x for x in labels if x not in dropped and x not in self.state.crashes)]

    def _missing(self, candidate: str, repeat: int) -> list[int]:
        done = self.state.values.get(candidate, {}).get(repeat, {})
        return [c for c in self.plan.levels if not done.get(c)]

    def _needs_blocks(self, candidate: str, repeat: int) -> list[int]:
        """Contended levels of `candidate` short of the precision target (passes 2..R only)."""
        if repeat == 0:
            return []
        pts = self._points()
        active = self._pass_candidates(1)
        out = []
        for c in self.plan.levels:
            if self.state.blocks(candidate, repeat, c) >= self.plan.max_blocks:
                continue
            rivals = core.contenders(pts, c, active)
            if len(rivals) > 1 and candidate in rivals and pts[candidate][c].rel_se > self.plan.precision:
                out.append(c)
        return out

    def level_seconds(self) -> list[float]:
        """What a level costs: the levels measured so far, else the sweep's configured duration (a level is
        its warm-up and its duration; a guess of a minute would make the first ETA jump)."""
        if self.state.level_s:
            return list(self.state.level_s)
        return [self.sweep_config.duration_s] if self.sweep_config.duration_s else []

    def eta(self, repeat: int, index: int, order: list[str]) -> core.Eta | None:
        """Time left: the rest of this pass, plus later passes at the current contenders. None while there is
        nothing to base it on (no startup of this host and mode known yet, or no level duration)."""
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
        startups = [*self.history_startup_s, *self.state.startups]
        level_s = self.level_seconds()
        if (restarts and not startups) or (levels and not level_s):
            return None
        eta = core.estimate_eta(restarts, levels, startups, level_s)
        if self.state.queue_waits:  # a Slurm host: each restart also waits in the queue (its own median)
            eta = core.Eta(eta.seconds + restarts * statistics.median(self.state.queue_waits), eta.restarts_left)
        return eta

    def eta_now(self) -> core.Eta | None:
        """The whole tune's time left from where it is (None before it starts, after it ends, or unknown)."""
        if self.current is None:
            return None
        candidate, repeat = self.current
        order = self._pass_candidates(repeat)
        return self.eta(repeat, order.index(candidate) if candidate in order else 0, order)

    def _progress(self, text: str, eta: core.Eta | None = None) -> None:
        self.on_event(TuneEvent(text, eta.seconds if eta else None))

    def _record(self, record: dict[str, object]) -> None:
        self.journal.write(record)
        self.state.apply(record)

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
                    self.current = (candidate, repeat)
                    self._progress(
                        f"pass {repeat + 1}/{self.plan.repeats}: {candidate} ({index + 1}/{len(order)}), "
                        f"levels {','.join(map(str, missing))}",
                        self.eta(repeat, index, order),
                    )
                    await self._measure(candidate, repeat, missing)
                if repeat + 1 < self.plan.repeats:
                    dropped = [x for x in self._dropped() if x not in self.state.dropped]
                    for name in dropped:
                        self._record({"type": "drop", "candidate": name, "after": repeat})
                    if dropped:
                        self._progress(f"after pass {repeat + 1}: dropped {', '.join(dropped)} (drop rule)")
        except asyncio.CancelledError:
            await self._settle_cancel()
            raise
        except SpecdashError as exc:
            aborted = exc.message
        finally:
            self.current = None
            self.restarting = False
        return self.snapshot(aborted)

    def snapshot(self, aborted: str | None = None) -> TuneResult:
        """The result so far (the policy of what is measured now; the final one at the end of `run`)."""
        return result_of(self.plan, self.state, aborted)

    async def _settle_cancel(self) -> None:
        starting = self.modes[self.current[0]] if self.restarting and self.current is not None else None
        await self.settle_cancel(starting)

    async def settle_cancel(self, starting: str | None) -> None:
        """Nothing new starts after a cancel: the server the tune was starting in mode `starting` (its next
        setting, or the tuned mode to verify; not yet measured) is stopped; one being measured keeps running.
        `after` says what runs now."""
        session = self.session
        if starting is not None:
            if session.server_live():
                try:
                    await session.stop()
                except SpecdashError as exc:
                    self.after = f"{starting} was starting for the tune and could not be stopped: {exc.message}"
                    return
            if session.status.mode == starting:  # a cancelled start stops what it launched (`session.start`)
                self.after = f"nothing runs now: {starting}, starting for the tune, was stopped"
            else:
                self.after = "nothing runs now: the tune was between two settings"
            return
        status = session.status
        if session.server_live() and status.mode:
            self.after = f"{status.mode} keeps running (pid {status.pid}); x stops it"
        else:
            self.after = "nothing runs now"

    async def _measure(self, candidate: str, repeat: int, levels: list[int]) -> None:
        mode = self.modes[candidate]
        cfg = self.session.config.mode(mode)
        seeded = dataclasses.replace(
            cfg, args=seeded_args(cfg.engine, self._base_args[mode], restart_seed(candidate, repeat))
        )
        self.session.config = dataclasses.replace(
            self.session.config, modes={**self.session.config.modes, mode: seeded}
        )
        ready = False
        measuring: int | None = None  # the level on the server now: the one a crash comes at
        for _attempt in range(3):
            try:
                if not ready:  # every (candidate, pass) is a restart of its own, with its own seed
                    await self._restart(candidate, mode, repeat)
                    ready = True
                while levels:  # the missing levels, then blocks of the contended ones on the same server
                    for c in levels:
                        measuring = c
                        await self._level(candidate, mode, repeat, c)
                    measuring = None
                    levels = self._needs_blocks(candidate, repeat)
                    if levels:
                        where = ",".join(map(str, levels))
                        self._progress(f"[{candidate} #{repeat + 1}] contended at C={where}: another block")
                self._finished(candidate, repeat)
                return
            except SpecdashError as exc:
                self.restarting = False  # not on a cancel: `_settle_cancel` needs to know a start was in flight
                status = self.session.status
                if self.session.host.state is not ConnectionState.CONNECTED:
                    self._progress(f"[{candidate}] link lost ({exc.message}); waiting for it")
                    await self._wait_link()
                    ready = ready and self.session.status.mode == mode and self.session.status.phase is Phase.READY
                    levels = self._missing(candidate, repeat) or self._needs_blocks(candidate, repeat)
                    if not levels:
                        self._finished(candidate, repeat)
                        return
                    continue
                if status.crash is None and status.phase not in (Phase.CRASHED, Phase.EXITED):
                    # Not the server's fault (the probe could not start, a stop failed...): the setting has
                    # not failed. Stop the tune; the journal keeps everything and --resume goes on from here.
                    raise SpecdashError(f"{candidate}: {exc.message} (run again with --resume)") from exc
                if not ready:  # it was restarted but never became ready: still a restart
                    self._record({"type": "startup", "candidate": candidate, "repeat": repeat, "seconds": None})
                crash = status.crash.reason if status.crash else exc.message
                # The level being measured, not the first one missing: a level that failed without a crash (a
                # timeout on a busy machine) stays missing, and the crash at the next one was put on it.
                in_flight = measuring if ready else None
                self._record(
                    {"type": "crash", "candidate": candidate, "repeat": repeat, "c": in_flight, "reason": crash}
                    | {"error": exc.message}
                )
                self._progress(f"[{candidate}] crashed at C={in_flight}: {crash}")
                return
        raise SpecdashError(f"{candidate}: the link kept failing; stopping the tune (run again with --resume)")

    async def _restart(self, candidate: str, mode: str, repeat: int) -> None:
        """Restart the server in `mode` and wait until it is ready; journal its seconds to ready."""
        self.restarting = True
        t0 = time.monotonic()
        # A stop and a start, never a switch: a resident live mode would sleep beside the one measured, or wake.
        if self.session.server_live():
            await self.session.stop()
        elif self.session.status.phase is Phase.CRASHED:
            # After a crashed setting, what it left (ranks still dying, a hung launcher) is cleaned up first, as
            # `x` does after a crash: the host refuses a start while any of it lives. A failed clean-up is not
            # this setting's crash: the start below says what is still there.
            try:
                await self.session.stop()
            except SpecdashError as exc:
                self._progress(f"[{candidate}] cleaning up after the last crash: {exc.message}")
        await self.session.start(mode)
        status = await self.session.wait_ready(mode)
        self.restarting = False
        total = time.monotonic() - t0
        record: dict[str, object] = {"type": "startup", "candidate": candidate, "repeat": repeat}
        if status.job_id:  # a Slurm job: its queue wait is not the engine's startup (nor the setting's)
            queued = max(0.0, status.queue_wait_s or 0.0)
            record |= {"seconds": round(max(0.0, total - queued), 3), "queue_wait_s": round(queued, 3)}
            record |= {"total_s": round(total, 3), "job_id": status.job_id}
        else:
            record["seconds"] = round(total, 3)
        self._record(record)

    async def _level(self, candidate: str, mode: str, repeat: int, c: int) -> None:
        """Measure one level (one block of it) on the live server; journal what the sweep returned."""
        block = self.state.blocks(candidate, repeat, c)
        t0 = time.monotonic()
        results = await self.session.sweep([mode], [c], config=self.sweep_config, prompts=self.prompts, quiet=True)
        result = results.get(mode)
        level = next((lv for lv in result.levels if lv.concurrency == c), None) if result else None
        if level is None or level.status != "done":
            why = (level.abort_reason if level else None) or (result.aborted if result else None) or "no result"
            self._progress(f"[{candidate} #{repeat + 1} C={c}] failed: {why}")
            return
        tok_s = level.stats.output_tok_s
        seconds = round(time.monotonic() - t0, 3)
        self._record(
            {"type": "level", "candidate": candidate, "repeat": repeat, "c": c, "block": block, "tok_s": tok_s}
            | {"seconds": seconds}
        )
        tag = f" block {block + 1}" if block else ""
        self._progress(f"[{candidate} #{repeat + 1} C={c}{tag}] {tok_s:.1f} tok/s")

    def _finished(self, candidate: str, repeat: int) -> None:
        self._record({"type": "done", "candidate": candidate, "repeat": repeat})

    async def _wait_link(self) -> None:
        deadline = time.monotonic() + self.link_wait_s
        while self.session.host.state is not ConnectionState.CONNECTED:
            if time.monotonic() > deadline:
                raise SpecdashError(f"link not back after {self.link_wait_s:g} s (run again with --resume)")
            await asyncio.sleep(0.5)
