"""`RemoteSession`: one host, its server and its bench, as one controllable thing (implements `Session`).

It owns the supervised SSH connection, the lifecycle operations, the watcher of the live run, the GPU
poll and the sweeps, and reports all of it as events to its listeners (the dashboard, the headless CLI).
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import time
import uuid
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import replace

from specdash.bench.greedy import chosen_prompts, greedy_outputs, workload_key
from specdash.bench.probe import ProbeSettings
from specdash.bench.prompts import PromptSet, load_prompts
from specdash.bench.store import RunMeta, Store
from specdash.bench.sweep import LevelResult, Sweep, SweepConfig, SweepResult
from specdash.config import Config, HostConfig, ModeConfig
from specdash.core.advisor import Report as AdviceReport
from specdash.core.compare import CrossoverKind, compute_crossover
from specdash.core.eta import SweepEstimate, estimate, sweep_estimate
from specdash.core.events import (
    BenchTick,
    BenchUpdate,
    GreedyUpdate,
    LevelRow,
    ModeInfo,
    ModesChanged,
    Notice,
    ServerStatus,
    SessionEvent,
)
from specdash.core.greedy import GreedyCheck, compare_outputs
from specdash.core.levels import DEFAULT_LEVELS
from specdash.core.resident import SwitchOutcome
from specdash.core.spec_export import policy_markdown
from specdash.core.status_text import RECORD_KINDS, sweep_plan
from specdash.core.timeline import Timeline
from specdash.core.tune import tune_refusal
from specdash.core.verdict import verdict
from specdash.engines.registry import get as get_engine
from specdash.engines.registry import make_rules
from specdash.errors import SpecdashError
from specdash.phases import Origin, Phase
from specdash.remote.events import Connected, ConnectionEvent, ConnectionState, Failed, Lost
from specdash.remote.ssh import SSHHost
from specdash.remote.ssherror import SSHError
from specdash.server import adopt as adoption
from specdash.server import resident
from specdash.server.adopt import Adoptable
from specdash.server.gpu import draft_architectures, gpu_inventory, poll_gpus
from specdash.server.lifecycle import Lifecycle, RunRecord, run_framed
from specdash.server.probe_agent import HostRunner, loopback_url
from specdash.server.resident import NotResident, Sleeper
from specdash.server.session import Listener
from specdash.server.slurm import SlurmLifecycle, SlurmWatch
from specdash.server.watch import ServerWatch
from specdash.slo import Slo, goodput_curve, max_concurrency_meeting

ADVISOR_LOG_BYTES = 16 * 1024 * 1024
"""The startup advisor reads at most this much of a start's log: its head (a start's lines come first)."""
ATTACH_CATCH_UP_S = 20.0
"""A switch away from a resident mode's server it just attached to waits this long for the watch to read its
log up to ready (a server not ready by then is stopped, not put to sleep)."""
READY_TIMEOUT_S = 3600.0
"""An A/B sweep waits this long at most for a restarted server to become ready."""
CRASH_DRAIN_S = 10.0
"""After a crash, how long the sweep may take to record its failed requests before it is cancelled."""
CRASH_SETTLE_S = 10.0
"""After a level failed, how long to wait for the watcher to see a crash in the log before calling it none."""
LINK_CHECK_S = 30.0
"""How long the sweep's link check (`true` over the connection) may take: longer than keepalive needs to
declare a cut link lost (3 x 5 s by default)."""


class RemoteSession:
    """See the module docstring; the methods follow `specdash.server.session.Session`."""

    def __init__(
        self,
        host: SSHHost,
        host_config: HostConfig,
        config: Config,
        *,
        store: Store | None = None,
        sweep_defaults: SweepConfig | None = None,
        clock: Callable[[], float] = time.time,
        greedy_prompts: int = 0,
    ) -> None:
        """`greedy_prompts`: prompts of the greedy spot check (`check_greedy`, and after each mode of an A/B
        sweep, where the mode is live anyway: its outputs are stored and compared with the first mode's);
        0: no check after an A/B, and `check_greedy` refuses."""
        self.host = host
        self.host_config = host_config
        self.config = config
        self.lifecycle: Lifecycle = (
            SlurmLifecycle(host, host_config) if host_config.slurm is not None else Lifecycle(host, host_config)
        )
        self.store = store
        self.sweep_defaults = sweep_defaults or SweepConfig(progress_interval_s=0.25, endpoint_follows_engine=True)
        self.clock = clock
        self.greedy_prompts = greedy_prompts
        self._listeners: list[Listener] = []
        self._watch: ServerWatch | None = None
        self._watch_task: asyncio.Task[None] | None = None
        self._retired: set[asyncio.Task[None]] = set()  # replaced watches, cancelled, until they have ended
        self._status = ServerStatus(Phase.STOPPED, origin=Origin.UNKNOWN)
        self._record: RunRecord | None = None
        self._sweep_task: asyncio.Task[object] | None = None
        self._sweep_id = ""
        self._sweep: Sweep | None = None  # the mode being swept now: told of link losses
        self._rows: dict[tuple[str, int], LevelRow] = {}
        self._curves: dict[str, dict[int, float]] = {}
        self._slo: Slo | None = None  # the running (or last) sweep's SLO, for its verdict
        self._reference = ""  # the running (or last) sweep's reference mode, whatever order it measures in
        self.results: dict[str, SweepResult] = {}
        """The last sweep's result per mode."""
        self._hidden_modes: set[str] = set()  # a tune's per-setting modes: listed only while one runs
        self._tune_task: asyncio.Task[object] | None = None
        self._tune_name = ""
        self._resident: dict[str, str] = {}  # a resident mode's state for the mode list (`ModeInfo.resident`)
        self._not_resident: set[str] = set()  # resident modes whose engine refused sleep mode on this host
        self._plain_restart: asyncio.Task[None] | None = None
        self.accept_by_run: dict[str, float | None] = {}
        """A resident server's accept length at its last wake (by run id): its next sleep need not ask again."""
        self._advice: dict[str, AdviceReport] = {}  # the advisor's report on each mode's last start here
        self._advice_task: asyncio.Task[None] | None = None
        self.last_switch: SwitchOutcome | None = None
        """How the last `switch` went (resident or restart, with its timing and why)."""
        self._closed = asyncio.Event()
        self._queue = host.subscribe()
        self._changed: asyncio.Future[None] | None = None  # resolved on the next status change
        self.attached = asyncio.Event()
        """Set once `run()` has connected and looked for a live run."""

    # -- Session ----------------------------------------------------------------------------------------

    @property
    def label(self) -> str:
        return self.host_config.name

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)
        listener(self._modes_event())
        listener(self._status)

    def unsubscribe(self, listener: Listener) -> None:
        """Stop sending events to `listener` (subscribed before; a second call is a no-op)."""
        if listener in self._listeners:
            self._listeners.remove(listener)

    def hide_modes(self, names: Iterable[str]) -> None:
        """Keep these configured modes out of the mode list, except while one of them runs (a tune's
        per-setting modes: one per candidate would flood the list)."""
        self._hidden_modes.update(names)

    def tune_running(self) -> bool:
        """True while a tune holds the claim (`claim_for_tune`)."""
        return self._tune_task is not None and not self._tune_task.done()

    @contextlib.contextmanager
    def claim_for_tune(self, name: str) -> Iterator[None]:
        """While in it, the current task (a tune, `specdash.tune`) owns the server: the viewers' actions are
        refused with `core.tune.tune_refusal`'s sentence; the task's own calls are not. All the session knows
        of a tune.

        Raises:
            SpecdashError: a tune or a sweep runs already.
        """
        if self.tune_running():
            raise SpecdashError("a tune is already running")
        if self.sweep_running():
            raise SpecdashError("a sweep is running; cancel it before starting a tune")
        self._tune_task = asyncio.current_task()
        self._tune_name = name
        try:
            yield
        finally:
            self._tune_task = None

    def refusal(self, action: str) -> str | None:
        """Why `action` (a viewer's: `start`, `stop`, `sweep`...) is refused now: a tune holding the claim
        (`claim_for_tune`) owns the server (`core.tune.tune_refusal`); None when it may run. The tune's own
        calls are never refused (they run in its task)."""
        if not self.tune_running():
            return None
        try:
            if asyncio.current_task() is self._tune_task:
                return None
        except RuntimeError:  # no running loop: not the tune's task either
            pass
        return tune_refusal(self._tune_name, action)

    def _check_free(self, action: str) -> None:
        why = self.refusal(action)
        if why is not None:
            raise SpecdashError(why)

    async def run(self) -> None:
        relay = asyncio.create_task(self._relay_connection_events())
        gpus = asyncio.create_task(poll_gpus(self.host, self._emit))
        try:
            await self.host.connect()
            await self.attach()
            self.attached.set()
            await self._closed.wait()
        finally:
            for task in (relay, gpus):
                task.cancel()
            await asyncio.gather(relay, gpus, return_exceptions=True)
            # What the relay had not passed on yet goes out now: a first connect that fails puts its `Failed`
            # on the queue just before it raises, and a viewer left with "connecting…" would wait for ever.
            while not self._queue.empty():
                self._emit(self._queue.get_nowait())
            await self._stop_watching()

    def server_live(self) -> bool:
        return self._status.phase not in (Phase.STOPPED, Phase.CRASHED, Phase.EXITED)

    def sweep_running(self) -> bool:
        return self._sweep_task is not None and not self._sweep_task.done()

    async def attach(self) -> RunRecord | None:
        """Find the live run recorded on the host and watch it, without launching anything."""
        record = await self.lifecycle.current()
        if any(m.resident for m in self.config.modes.values()):
            await self.sleeping()
            if record is not None and record.alive:
                self._set_resident(record.mode, "awake")
        if record is not None and record.alive:
            origin = Origin.ADOPTED if record.adopted else Origin.ATTACHED
            self._watch_run(record, note=f"{origin.value}: run {record.id}", origin=origin)
            return record
        if record is not None and record.damaged:  # never shown as "no server": it may be running
            said = f"the run record {record.id} on {self.label} is damaged: whether its server runs cannot be told"
            self._emit(Notice(said + " ('specdash status' says more)", "warning"))
        self._set_status(ServerStatus(Phase.STOPPED, origin=Origin.NONE))
        return None

    async def start(self, mode: str) -> None:
        self._check_free("start")
        cfg = self.config.mode(mode)
        if self.server_live():
            raise SpecdashError(f"{self._status.mode or 'a server'} is already running on {self.label}; stop it first")
        history = self._history(cfg.name)
        eta = estimate(history, {}, Phase.LAUNCHING, 0.0, order=make_rules(cfg.engine).startup_order)
        self._set_status(
            ServerStatus(
                Phase.LAUNCHING,
                mode=cfg.name,
                engine=cfg.engine,
                port=cfg.port,
                started_at=self.clock(),
                eta_remaining=eta.remaining if eta else None,
                eta_samples=eta.samples if eta else 0,
                eta_spread=eta.spread if eta else None,
                origin=Origin.LAUNCHED,
            )
        )
        if cfg.name in self._not_resident:
            cfg = replace(cfg, resident=False)  # its engine refused sleep mode here: launched without the flags
        try:
            record = await self.lifecycle.start(cfg)
        except SpecdashError:
            self._set_status(ServerStatus(Phase.STOPPED, origin=Origin.NONE))
            raise
        except asyncio.CancelledError:
            # A cancelled start leaves nothing running: the launch may have reached the host already.
            await self._undo_launch(cfg.name)
            raise
        self._watch_run(record, origin=Origin.LAUNCHED)

    async def _undo_launch(self, mode: str) -> None:
        """Stop the run of `mode` that a cancelled `start` may have launched (found by the host's record)."""
        try:
            record = await self.lifecycle.current()
            if record is not None and record.alive and record.mode == mode:
                report = await self.lifecycle.stop(record, self._grace(mode))
                self._emit(Notice(f"start of {mode} cancelled: {report.summary()}", "warning"))
        except (SpecdashError, SSHError) as exc:
            self._emit(Notice(f"start of {mode} cancelled; it may still be starting: {exc}", "warning"))
        self._set_status(ServerStatus(Phase.STOPPED, mode=mode, origin=Origin.NONE))

    async def stop(self) -> None:
        self._check_free("stop")
        record = self._record or await self.lifecycle.current()
        if record is None or not (self.server_live() or record.alive):
            raise SpecdashError(f"no server of ours is running on {self.label}")
        if self.sweep_running():
            await self._cancel_sweep()
        grace = self._grace(record.mode)
        before = self._status
        if self._watch is not None:
            self._watch.mark_stopping()
        report = await self.lifecycle.stop(record, grace)
        self._emit(
            Notice(
                report.summary(),
                "warning" if report.survivors or report.gpu_held or not report.port_free else "information",
            )
        )
        if self._watch_task is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._watch_task), 5.0)
        await self._stop_watching()
        if before.phase is Phase.CRASHED:
            # Cleaning up after a crash: it stays a crash; what was left is gone (or listed as survivors).
            cleaned = f"cleaned up {len(report.members)} process(es) left by the crash"
            self._set_status(replace(before, leftovers=tuple(report.survivors), note=cleaned))
            return
        origin = before.origin if before.origin in (Origin.LAUNCHED, Origin.ATTACHED, Origin.ADOPTED) else Origin.NONE
        self._set_status(
            ServerStatus(Phase.STOPPED, mode=record.mode, engine=record.engine, origin=origin, pid=record.pid)
        )

    async def find_adoptable(self, *, pid: int | None = None, port: int | None = None, log: str = "") -> Adoptable:
        """Describe the server process `pid` (or the one on `port`) that specdash did not start."""
        found = await adoption.inspect(self.host, self.host_config, pid=pid, port=port)
        return adoption.assess(found, self.config, self.host_config, log)

    async def adopt(self, target: Adoptable) -> None:
        """Adopt `target`: record it as the host's current run and watch it from the start of its log."""
        self._check_free("adopt")
        if self.server_live():
            raise SpecdashError(f"{self._status.mode or 'a server'} is already running on {self.label}; stop it first")
        record = await adoption.adopt(self.host, self.host_config, target)
        how = f"mode {target.mode}" if target.matched else "unmanaged"
        self._watch_run(record, note=f"adopted pid {record.pid} ({how}); log {target.log_path}", origin=Origin.ADOPTED)
        self._emit(self._modes_event())

    async def adopt_job(self, job_id: str, mode: str = "") -> None:
        """Adopt a Slurm job someone started by hand (`adopt --job ID`): the SSH user's own, still live; its
        output file is followed, its head node's port watched, and a stop cancels it (after a confirmation)."""
        self._check_free("adopt")
        if not isinstance(self.lifecycle, SlurmLifecycle):
            raise SpecdashError(f'{self.label} is not a Slurm host (scheduler = "slurm"): --job needs one')
        if self.server_live():
            raise SpecdashError(f"{self._status.mode or 'a server'} is already running on {self.label}; stop it first")
        cfg = self.config.mode(mode) if mode else None
        record = await self.lifecycle.adopt_job(
            job_id, mode or f"job-{job_id}", cfg.engine if cfg else "sglang", cfg.port if cfg else 30000
        )
        self._watch_run(record, note=f"adopted job {job_id}; log {record.log_path}", origin=Origin.ADOPTED)
        self._emit(self._modes_event())

    async def restart(self) -> None:
        self._check_free("restart")
        mode = self._status.mode or (self._record.mode if self._record else "")
        if not mode:
            raise SpecdashError("nothing to restart: no mode has run yet")
        await self.switch(mode)

    async def switch(self, mode: str, *, restart: bool = False) -> SwitchOutcome:
        """Make `mode` the live one: the live server sleeps if its mode is resident (else it stops), then a
        sleeping server of `mode` is woken and verified (`server.resident`), or `mode` is (re)started; any
        failure of a sleep or a wake falls back to a stop or a restart and says why. `restart`: never wake."""
        self._check_free("switch")
        cfg = self.config.mode(mode)  # a bad name fails before anything is stopped
        began = time.monotonic()
        notes: list[str] = []
        steps: list[tuple[str, float]] = []

        def step(name: str) -> None:
            steps.append((name, time.monotonic() - began - sum(t for _, t in steps)))

        if self.server_live() or (self._record is not None and self._record.alive):
            record = self._record or await self.lifecycle.current()
            live_cfg = self.config.modes.get(record.mode) if record is not None else None
            if live_cfg is not None and self._is_resident(live_cfg.name) and self._status.origin is Origin.ATTACHED:
                # Just attached: the watch is still reading the run's log up to where it is (ready, usually).
                with contextlib.suppress(TimeoutError):
                    await self.wait_status((Phase.READY, Phase.CRASHED, Phase.EXITED), timeout=ATTACH_CATCH_UP_S)
            if (
                record is not None
                and live_cfg is not None
                and self._is_resident(live_cfg.name)
                and record.mode != mode
                and not record.adopted
                and self._status.phase is Phase.READY
                and not self.sweep_running()
            ):
                notes += await self._put_to_sleep(record, live_cfg)
                step(f"sleep {record.mode}")
            else:
                await self.stop()
                step(f"stop {record.mode if record is not None else 'server'}")
        why = ""
        if self._is_resident(mode):
            mine = [s for s in await resident.sleepers(self) if s.record.mode == mode]
            step("find sleeping")
            if mine and restart:
                why = "a restart was asked for (--restart)"
            elif mine:
                try:

                    def on_state(state: str) -> None:
                        step({"waking": "check room", "verifying": "wake"}.get(state, state))
                        self._set_resident(mode, state)

                    identical, total, accept = await resident.wake(self, mine[0], cfg, on_state)
                    step("verify")
                    await resident.mark_awake(self, mine[0].record)
                except NotResident as exc:
                    why = exc.message
                else:
                    outcome = SwitchOutcome(
                        mode,
                        True,
                        time.monotonic() - began,
                        identical,
                        total,
                        accept,
                        self._restart_s(mode),
                        notes=tuple(notes),
                        steps=tuple(steps),
                    )
                    self._set_resident(mode, "awake")
                    self._watch_run(mine[0].record, note=outcome.text, origin=Origin.ATTACHED)
                    self._emit(Notice("; ".join((outcome.text, *notes))))
                    self.last_switch = outcome
                    return outcome
            for sleeper in mine:  # not woken: stopped, then started afresh
                await self.lifecycle.stop(sleeper.record, self._grace(mode))
        if any(m.resident for m in self.config.modes.values()):
            asleep = [s for s in await resident.sleepers(self) if s.record.mode != mode]
            if asleep and not (memory := await resident.plan(self, cfg, asleep)).fits:
                names = ", ".join(s.record.mode for s in asleep)
                raise SpecdashError(
                    "; ".join(memory.lines) + f". Not started: stop the sleeping ones ({names}) with 'specdash down'"
                )
        await self.start(mode)
        self._set_resident(mode, "awake" if self._is_resident(mode) else "")
        outcome = SwitchOutcome(
            mode, False, time.monotonic() - began, restart_s=self._restart_s(mode), why_restart=why, notes=tuple(notes)
        )
        if why or notes:
            self._emit(Notice("; ".join((outcome.text, *notes)), "warning"))
        self.last_switch = outcome
        return outcome

    async def _put_to_sleep(self, record: RunRecord, cfg: ModeConfig) -> list[str]:
        """Put the live server of a resident mode to sleep; if it cannot, stop it and say why."""
        self._set_resident(cfg.name, "going to sleep")
        try:
            sleeper = await resident.sleep(self, record, cfg)
        except NotResident as exc:
            self._set_resident(cfg.name, "")
            await self.stop()
            self._set_resident(cfg.name, "resident")
            return [f"{cfg.name} could not sleep ({exc.message}): stopped it instead"]
        await self._stop_watching()  # the server lives on, asleep: not watched until it wakes
        self._record = None
        self._set_resident(cfg.name, f"asleep ({sleeper.held_gib:.1f} GiB held)")
        asleep = f"{record.mode} asleep, pid {record.pid}"
        self._set_status(
            ServerStatus(Phase.STOPPED, mode=record.mode, engine=record.engine, origin=Origin.NONE, note=asleep)
        )
        return []

    async def sleeping(self) -> list[Sleeper]:
        """The sleeping servers of resident modes on the host (for `status`, `down` and the mode list)."""
        found = await resident.sleepers(self)
        for sleeper in found:
            self._resident[sleeper.record.mode] = f"asleep ({sleeper.held_gib:.1f} GiB held)"
        self._emit(self._modes_event())
        return found

    def _set_resident(self, mode: str, state: str) -> None:
        cfg = self.config.modes.get(mode)
        if cfg is None or not cfg.resident:
            return
        self._resident[mode] = state or "resident"
        self._emit(self._modes_event())

    def sweep_estimate(self, modes: Sequence[str], levels: Sequence[int]) -> SweepEstimate:
        """See `Session.sweep_estimate`: each start's recorded starts to ready, the sweep's level duration
        (None for request-count levels, whose length is not known before they run)."""
        starts = [step.mode for step in sweep_plan(self._status, modes) if step.action != "measure"]
        return sweep_estimate(
            [(mode, self.ready_s(mode)) for mode in starts], len(levels) * len(modes), self.sweep_defaults.duration_s
        )

    def ready_s(self, mode: str) -> tuple[float, ...]:
        """Seconds to ready of `mode`'s recorded launches on this host, newest first."""
        if self.store is None:
            return ()
        records = self.store.startups(host=self.label, mode=mode, limit=10, kind=RECORD_KINDS[Origin.LAUNCHED])
        return tuple(float(r.total_s) for r in records if r.outcome == "ready" and r.total_s)

    def _restart_s(self, mode: str) -> float | None:
        """The last start to ready of `mode` on this host, from the store."""
        if self.store is None:
            return None
        for r in self.store.startups(host=self.label, mode=mode, limit=5, kind=RECORD_KINDS[Origin.LAUNCHED]):
            if r.outcome == "ready" and r.total_s:
                return float(r.total_s)
        return None

    async def sweep(
        self,
        modes: Sequence[str],
        levels: Sequence[int],
        *,
        config: SweepConfig | None = None,
        prompts: PromptSet | None = None,
        quiet: bool = False,
        reference: str | None = None,
    ) -> dict[str, SweepResult]:
        """See `Session.sweep`; `config` and `prompts` override the session's defaults (headless CLI); `quiet`:
        no notice that it measures or is done (a tune, measuring one level per call, says so itself).

        `reference` is the mode the others are compared with (the verdict, the greedy check); it defaults to
        the first of `modes`. The order of `modes` is only the order of measuring (the live mode first saves a
        restart): it never changes the reference.

        Returns what it measured: the result per mode that finished its levels (also in `self.results`; the
        store has every sample as it arrived). A crash raises `SpecdashError` (levels before it are in the
        store and in the results of the call that measured them).
        """
        self._check_free("sweep" if len(modes) < 2 else "ab")
        if self.sweep_running():
            raise SpecdashError("a sweep is already running")
        for mode in modes:
            self.config.mode(mode)
        if reference is not None and reference not in modes:
            raise SpecdashError(f"the reference {reference!r} is not one of the swept modes ({', '.join(modes)})")
        if not modes:
            if not self._status.mode or self._status.phase is not Phase.READY:
                raise SpecdashError("start a server first (the sweep measures the live mode)")
            modes = [self._status.mode]
        self._sweep_task = asyncio.current_task()
        self._sweep_id = uuid.uuid4().hex[:12]  # shared by the runs of this sweep's modes (`specdash runs`)
        self._reference = reference or modes[0]
        self._rows.clear()
        self._curves.clear()
        self.results.clear()
        config = replace(config or self.sweep_defaults, levels=tuple(levels))
        self._slo = config.slo
        prompts = prompts or load_prompts("chat")
        for mode in modes:
            for c in config.effective_levels():
                self._rows[(mode, c)] = LevelRow(mode, c, "pending")
        self._publish_bench(running=True)
        try:
            for mode in modes:
                await self._ensure_ready(mode, quiet=quiet)
                await self._sweep_mode(mode, config, prompts)
                result = self.results.get(mode)
                if len(modes) > 1 and self.greedy_prompts and result is not None and result.aborted is None:
                    await self._greedy_after_sweep(mode, self._reference, prompts, config)
        except asyncio.CancelledError:
            self._emit(Notice("sweep cancelled; finished levels are kept", "warning"))
            raise
        finally:
            self._sweep_task = None
            self._publish_bench(running=False)
        if not quiet:
            self._emit(Notice(f"sweep done: {self._crossover_text() or 'see the table'}", bell=True))
        return dict(self.results)

    async def check_greedy(self, reference: str) -> None:
        """The greedy spot check on the live mode: fetch its outputs for `greedy_prompts` prompts at
        temperature 0 (stored), and compare them with `reference`'s stored outputs for the same prompts.
        Reported as `GreedyUpdate` events; no restart (a reference without stored outputs is said so)."""
        self._check_free("greedy")
        if not self.greedy_prompts:
            raise SpecdashError("the greedy check is off ([bench] greedy_prompts = 0)")
        self.config.mode(reference)
        await self._greedy_check(reference, load_prompts("chat"), self.sweep_defaults.settings_for(self._live_engine()))

    def _live_engine(self) -> str:
        """The live mode's engine (its config's, else what the status says): the greedy check's endpoint
        follows it like the sweep's (`SweepConfig.settings_for`; vLLM has no /generate)."""
        cfg = self.config.modes.get(self._status.mode or "")
        return cfg.engine if cfg is not None else self._status.engine

    async def greedy_texts(self, n: int, prompts: Sequence[str], settings: ProbeSettings) -> list[str]:
        """The live mode's outputs at temperature 0 for the first `n` of `prompts` (cycling), stored per host,
        mode and workload (`bench.greedy.workload_key`)."""
        status = self._status
        if status.phase is not Phase.READY or not status.mode:
            raise SpecdashError("greedy check: start a server first (the check asks the live mode)")
        chosen = chosen_prompts(prompts, n)
        port = status.port if status.port is not None else self.config.mode(status.mode).port
        local = await self.host.forward(port, self._server_host())
        texts = await greedy_outputs(
            f"http://127.0.0.1:{local}",
            chosen,
            endpoint=settings.endpoint,
            output_len=settings.output_len,
            model=settings.model,
        )
        if self.store is not None:
            key = workload_key(chosen, settings.endpoint, settings.output_len, settings.model)
            self.store.add_greedy_outputs(self.label, status.mode, key, texts)
        return texts

    async def _greedy_check(self, reference: str, prompts: PromptSet, settings: ProbeSettings) -> GreedyCheck | None:
        mode, n = self._status.mode or "", self.greedy_prompts
        self._emit(GreedyUpdate(mode, reference, n, running=True))
        try:
            texts = await self.greedy_texts(n, prompts.prompts, settings)
        except SpecdashError as exc:
            self._emit(GreedyUpdate(mode, reference, n, note=f"greedy check on {mode} failed: {exc.message}"))
            raise
        if mode == reference:
            note = f"{mode}'s outputs for {n} prompts are stored as the reference: check a speculative mode next"
            self._emit(GreedyUpdate(mode, reference, n, note=note))
            return None
        key = workload_key(chosen_prompts(prompts.prompts, n), settings.endpoint, settings.output_len, settings.model)
        stored = self.store.greedy_outputs(self.label, reference, key) if self.store is not None else None
        if stored is None:
            note = (
                f"{mode}'s outputs are stored; {reference} has none for these {n} prompts on {self.label} yet: "
                f"run the check on {reference} (or an A/B of both) to compare"
            )
            self._emit(GreedyUpdate(mode, reference, n, note=note))
            return None
        when, ref_texts = stored
        check = compare_outputs(reference, mode, ref_texts, texts)
        stored_at = when[:16].replace("T", " ")  # ISO seconds in UTC (`Store`): to the minute is enough here
        self._emit(GreedyUpdate(mode, reference, n, check=check, note=f"{reference}'s outputs of {stored_at} UTC"))
        if check.identical < check.total:
            self._emit(Notice(check.text.splitlines()[0], "warning", bell=True))
        return check

    async def _greedy_after_sweep(self, mode: str, reference: str, prompts: PromptSet, config: SweepConfig) -> None:
        # Part of the A/B: the mode is live now, so its outputs cost N requests and no restart. A failure is
        # a warning; the sweep's measurements stand.
        try:
            await self._greedy_check(reference, prompts, config.settings_for(self._live_engine()))
        except SpecdashError as exc:
            self._emit(Notice(exc.message, "warning"))

    @property
    def status(self) -> ServerStatus:
        """The latest server status."""
        return self._status

    async def wait_status(self, phases: Collection[Phase], timeout: float | None = None) -> ServerStatus:
        """Wait until the server is in one of `phases` (returns at once if it is)."""
        async with asyncio.timeout(timeout):
            while self._status.phase not in phases:
                await self._status_changed()
        return self._status

    async def watch_finished(self, timeout: float) -> None:
        """Wait (at most `timeout` s) until the watch of the current run has ended, e.g. after a crash,
        when it has listed what the crash left in the process group."""
        task = self._watch_task
        if task is not None and not task.done():
            # `wait` never raises the watch's own end, and a cancel of the caller still reaches it.
            await asyncio.wait({task}, timeout=timeout)

    async def cancel_sweep(self) -> None:
        self._check_free("cancel_sweep")
        await self._cancel_sweep()

    async def _cancel_sweep(self) -> None:
        task = self._sweep_task
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()
            # gather returns the task's end (its CancelledError included) but raises a cancel of the caller:
            # suppressing CancelledError around `await task` would swallow that one too.
            await asyncio.gather(task, return_exceptions=True)

    async def close(self) -> None:
        await self._cancel_sweep()
        self._closed.set()
        await self._stop_watching()
        await self.host.close()

    # -- watching ---------------------------------------------------------------------------------------

    def _watch_run(self, record: RunRecord, note: str = "", origin: Origin = Origin.LAUNCHED) -> None:
        self._retire_watch()
        self._record = record
        history = self._history(record.mode)
        stuck = mode.stuck if (mode := self.config.modes.get(record.mode)) is not None else None
        common = {
            "history": history,
            "on_ready": self._seen_ready,
            "clock": self.clock,
            "state_dir": self.host_config.state_dir,
            "label": self.label,
            "origin": origin,
            "members": self.lifecycle.members,
        }
        watch: ServerWatch

        def emit(event: SessionEvent) -> None:
            # Only the current run's watch speaks: a replaced one's late status (a crashed run's exit, read
            # after the next start) would overwrite the new run's, and a tune took its own restart for a crash.
            if self._watch is watch:
                self._emit_watch(event)

        if isinstance(self.lifecycle, SlurmLifecycle) and record.job_id:
            watch = SlurmWatch(self.host, record, emit, lifecycle=self.lifecycle, stuck=stuck, **common)
        else:
            watch = ServerWatch(self.host, record, emit, stuck=stuck, **common)  # type: ignore[arg-type]
        if note:
            watch.state.note = note
        self._watch = watch
        # Published now, not when the watch task first runs: whatever decides on the status next (the
        # sweep's plan, the dialogs) sees this run, not the state before it.
        self._set_status(watch.status())
        self._watch_task = asyncio.create_task(watch.run(), name=f"watch-{record.id}")

    def _retire_watch(self) -> None:
        """Stop watching the current run without waiting (a start after a crash: the crashed run's watch may
        still be reading its exit). `_stop_watching` waits for what was retired."""
        task, self._watch_task, self._watch = self._watch_task, None, None
        if task is not None and not task.done():
            task.cancel()
            self._retired.add(task)
            task.add_done_callback(self._retired.discard)

    async def _stop_watching(self) -> None:
        self._retire_watch()
        if self._retired:
            # Not `suppress(CancelledError)` around `await task`: that would swallow a cancel of the caller
            # too (a cancelled tune's stop went on to start the next setting).
            await asyncio.gather(*self._retired, return_exceptions=True)

    def _emit_watch(self, event: SessionEvent) -> None:
        if isinstance(event, ServerStatus):
            self._set_status(event)
        else:
            self._emit(event)

    def _history(self, mode: str) -> list[dict[str, float]]:
        if self.store is None:
            return []
        records = self.store.startups(host=self.label, mode=mode, limit=10, kind=RECORD_KINDS[Origin.LAUNCHED])
        return [dict(r.phases) for r in reversed(records) if r.outcome == "ready"]

    async def advise(self, record: RunRecord, used_max: int = max(DEFAULT_LEVELS)) -> AdviceReport:
        """The startup advisor's report on a run's log (`core.advisor`), for sweeps up to `used_max` concurrent
        requests; `AdvisorError` for a log it refuses."""
        from specdash.core.advisor import advise

        _, log = await run_framed(self.host, f"head -c {ADVISOR_LOG_BYTES} {shlex.quote(record.log_path)}")
        return advise(log.splitlines(), used_max, record.engine)

    async def _advise_start(self, record: RunRecord) -> None:
        """After a start this session launched: the advisor's best piece of advice as a notice, and for advice
        given at the mode's previous start and applied since, the measured saving beside the prediction."""
        from specdash.core.advisor import AdvisorError, measured_saving

        try:
            report = await self.advise(record)
        except (AdvisorError, SpecdashError, SSHError, OSError):
            return  # advice is a bonus: a log it cannot read says nothing
        before = self._advice.get(record.mode)
        self._advice[record.mode] = report
        for given in before.advice if before is not None else ():
            token = given.flag.split()[0]
            if token.startswith("--") and token in record.command:
                saved = measured_saving(before, report, given) if before is not None else 0.0
                self._emit(
                    Notice(f"{record.mode}: {given.title}: saved {saved:.0f} s (predicted {given.saving_s:.0f} s)")
                )
        if report.advice:
            best = report.advice[0]
            self._emit(
                Notice(
                    f"startup advice for {record.mode}: {best.title}: save about {best.saving_s:.0f} s "
                    f"({best.flag}; {best.caveat}). All of it: specdash advise {self.label} --mode {record.mode}"
                )
            )

    def _seen_ready(self, timeline: Timeline) -> None:
        """Record what was seen: a startup (phase durations, for the ETA) only when watched from launch."""
        watch, run = self._watch, self._record
        if self.store is None or watch is None or run is None:
            return
        kind = RECORD_KINDS.get(watch.origin, "attach")
        if watch.origin is Origin.LAUNCHED:
            self._advice_task = asyncio.create_task(self._advise_start(run), name=f"advise-{run.id}")
            phases = timeline.history_record()
            if phases is None:
                return
            self.store.add_startup(self.label, run.mode, phases, timeline.total(), "ready", run.engine, kind)
        else:
            self.store.add_startup(self.label, run.mode, {}, None, "ready", run.engine, kind)

    async def _ensure_ready(self, mode: str, *, quiet: bool = False) -> None:
        # The same plan the A/B dialog told the user (`sweep_plan`): a live run of this mode is waited for,
        # never restarted (a restart throws a long load away); anything else is (re)started.
        step = sweep_plan(self._status, [mode])[0]
        if step.action != "measure":
            await self.switch(mode)
        await self.wait_ready(mode)
        if not quiet:
            how = {"measure": "as it runs", "start": "started", "restart": "restarted"}[step.action]
            self._emit(Notice(f"sweep: measuring {mode}, pid {self._status.pid} ({how})"))

    async def wait_ready(self, mode: str) -> ServerStatus:
        """Wait (at most `READY_TIMEOUT_S`) until the server started in `mode` is ready.

        Raises:
            SpecdashError: it crashed, exited or stopped before it was ready.
        """
        async with asyncio.timeout(READY_TIMEOUT_S):
            while self._status.phase is not Phase.READY:
                settled = self._watch is None or self._watch.done.is_set()
                if self._status.phase in (Phase.CRASHED, Phase.EXITED) or (
                    self._status.phase is Phase.STOPPED and settled
                ):
                    reason = self._status.crash.reason if self._status.crash else self._status.phase.value
                    raise SpecdashError(f"{mode} did not become ready: {reason}")
                await self._status_changed()
        return self._status

    # -- bench ------------------------------------------------------------------------------------------

    def _host_runner(self, port: int) -> Callable[[ProbeSettings, tuple[str, ...]], HostRunner] | None:
        """Runners of a probe on the server's host: on the host's loopback, or for a Slurm job a step of the job
        on its head node against the head node's address (`SlurmLifecycle.step_argv`). None where the server's
        node cannot run it (a Slurm job whose head node is not known)."""
        watch = self._watch
        record = watch.record if watch is not None else self._record
        launch: list[str] = []
        if isinstance(self.lifecycle, SlurmLifecycle) and record is not None and record.job_id:
            launch = self.lifecycle.step_argv(record)
            if not launch:
                return None
            url = loopback_url(port, record.server_host)
        elif self._server_host() == "127.0.0.1":
            url = loopback_url(port)
        else:
            return None

        def make(settings: ProbeSettings, prompts: tuple[str, ...]) -> HostRunner:
            return HostRunner(self.host, url, settings, prompts, launch=launch)

        return make

    async def _sweep_mode(self, mode: str, config: SweepConfig, prompts: PromptSet) -> None:
        cfg = self.config.modes.get(mode)
        if cfg is None and self._status.mode == mode and self._status.port is not None:
            port, engine = self._status.port, self._status.engine  # an adopted server in no configured mode
        else:
            cfg = self.config.mode(mode)
            port, engine = cfg.port, cfg.engine
        local = await self.host.forward(port, self._server_host())
        record = self._record
        provenance = {
            "command": list(record.command) if record is not None and record.mode == mode else [],
            "gpus": await gpu_inventory(self.host),
            "sweep_id": self._sweep_id,
            "draft_architectures": await draft_architectures(self.host, cfg) if cfg is not None else [],
        }
        meta = RunMeta(host=self.label, mode=mode, engine=engine, provenance=provenance)

        def progress(p: BenchTick) -> None:
            key = (mode, p.concurrency)
            if p.phase == "paused":  # rare: published at once, so the table says why nothing moves
                self._rows[key] = replace(self._rows[key], status="paused", warning="link lost: waiting for it")
                self._publish_bench(running=True)
                return
            self._rows[key] = replace(self._rows[key], status="warmup" if p.phase == "warmup" else "running")
            self._emit(p)

        def level_done(result: LevelResult) -> None:
            self._rows[(mode, result.concurrency)] = result.to_row()
            if result.status == "done":
                self._curves.setdefault(mode, {})[result.concurrency] = result.stats.output_tok_s
            self._publish_bench(running=True)

        runner = Sweep(
            f"http://127.0.0.1:{local}",
            replace(config, mode=mode),
            prompts,
            self.store,
            run_meta=meta,
            on_progress=progress,
            on_level_done=level_done,
            check_link=self._link_ok,
            link_in_process=True,  # the port forward runs in this process (SSHHost)
            host_runner=self._host_runner(port) if config.probe == "host" else None,
            on_warning=lambda text: self._emit(Notice(f"{mode}: {text}", "warning")),
        )
        if config.probe != "host":
            runner.probe = {"where": "local", "why": 'probe = "local" (the config\'s [bench] or --probe)'}
        elif runner.host_runner is None:
            runner.probe = {"where": "local", "why": "a Slurm job whose head node is not known yet"}
        if self.host.state is not ConnectionState.CONNECTED:
            runner.link_lost(f"connection {self.host.state.value}")
        self._sweep = runner
        sweep = asyncio.create_task(runner.run())
        crash = asyncio.create_task(self._wait_crash())
        try:
            done, _ = await asyncio.wait({sweep, crash}, return_when=asyncio.FIRST_COMPLETED)
            if crash in done and not sweep.done():
                # Give the probe a moment to record the requests the crash cut off (they fail fast: reset,
                # refused) and to fail the level itself; cancel only if it does not.
                await asyncio.wait({sweep}, timeout=CRASH_DRAIN_S)
                if sweep.done() and not sweep.cancelled() and sweep.exception() is None:
                    self.results[mode] = sweep.result()
                sweep.cancel()
                await asyncio.gather(sweep, return_exceptions=True)
                self._note_crash(mode, runner.run_id)
                raise SpecdashError(f"{mode} crashed during the sweep; finished levels are kept")
            result = sweep.result()
            self.results[mode] = result
            if any(lv.status == "failed" for lv in result.levels) and not crash.done():
                # A level can fail faster (a dead server fails its warm-up) than the log's crash line reaches
                # the watcher: wait for it a bounded moment, so a crash is reported as one, with its line.
                await asyncio.wait({crash}, timeout=CRASH_SETTLE_S)
            if crash.done() and not crash.cancelled():
                self._note_crash(mode, runner.run_id)
                raise SpecdashError(f"{mode} crashed during the sweep; finished levels are kept")
            if result.aborted:
                self._emit(Notice(f"{mode}: sweep stopped: {result.aborted}", "warning"))
        finally:
            crash.cancel()
            # Cancelled (cancel_sweep, quit, the tour stopped by a key): the probe stops too. Left running, it
            # went on loading the server and publishing "running · 4/8 levels" after the sweep had ended.
            sweep.cancel()
            await asyncio.gather(crash, sweep, return_exceptions=True)
            for key, row in self._rows.items():
                if key[0] == mode and row.status in ("warmup", "running", "paused"):
                    self._rows[key] = replace(row, status="pending", warning="cancelled before it finished")
            self._sweep = None
            for c, why in runner.interruptions:
                self._emit(Notice(f"{mode} C={c}: {why}; the level ran again after the link came back", "warning"))

    def _note_crash(self, mode: str, run_id: int | None) -> None:
        """The server crashed during `mode`'s sweep: the level it crashed at says so with the reason, in the
        table (and its notes) and in the store (`compare`, the report). Levels run in order: the one in
        flight, else the one the probe failed just before the crash line came, else the first not begun."""
        crash, phase = self._status.crash, self._status.phase
        reason = crash.reason if crash is not None else f"the server {phase.value}"
        rows = [(key, row) for key, row in self._rows.items() if key[0] == mode]
        at = (
            next((kr for kr in rows if kr[1].status in ("warmup", "running", "paused")), None)
            or next((kr for kr in reversed(rows) if kr[1].status == "failed"), None)
            or next((kr for kr in rows if kr[1].status == "pending"), None)
        )
        if at is None:
            return
        key, row = at
        if phase is Phase.STOPPED:  # stopped (by the user, or `down`): not a crash, but the level is cut short
            self._rows[key] = replace(row, status="failed", warning="the server was stopped during this level")
            return
        self._rows[key] = replace(row, status="failed", crash=reason)
        if self.store is not None and run_id is not None:
            self.store.note_crash(run_id, row.concurrency, f"server crashed: {reason}")

    async def _link_ok(self) -> bool:
        """Whether the SSH connection still carries commands (the sweep asks when requests failed)."""
        try:
            await self.host.run("true", timeout=LINK_CHECK_S)
        except SSHError:
            return False
        return True

    async def _wait_crash(self) -> None:
        while self._status.phase not in (Phase.CRASHED, Phase.EXITED, Phase.STOPPED):
            await self._status_changed()

    def _judged_curves(self) -> dict[str, dict[int, float]]:
        """The curves measured so far, the reference's first (`core.verdict` compares with the first one)."""
        ref = self._reference
        first = {ref: self._curves[ref]} if ref in self._curves else {}
        return first | {m: c for m, c in self._curves.items() if m != ref}

    def _crossover_text(self) -> str:
        """The verdict of the modes measured so far (`core.verdict`): one mode's peak, or where a mode stops
        beating the reference."""
        curves = self._judged_curves()
        if self._slo is None:
            return verdict(curves)
        judged = {
            mode: [row.slo for (m, _), row in self._rows.items() if m == mode and row.status == "done" and row.slo]
            for mode in curves
        }
        return verdict(
            curves,
            slo_text=self._slo.text,
            capacity={m: max_concurrency_meeting(levels) for m, levels in judged.items()},
            goodput={m: goodput_curve(levels) for m, levels in judged.items()},
        )

    def _publish_bench(self, *, running: bool) -> None:
        crossover = None
        judged = self._judged_curves()
        if len(judged) >= 2:
            (_, base), (_, spec) = list(judged.items())[:2]
            result = compute_crossover(base, spec)
            crossover = result.concurrency if result.kind is CrossoverKind.CROSSES else None
        curves = {m: tuple(sorted(c.items())) for m, c in judged.items()}
        policy = policy_markdown(judged, self.config.modes)
        self._emit(BenchUpdate(tuple(self._rows.values()), curves, crossover, self._crossover_text(), running, policy))

    # -- plumbing ---------------------------------------------------------------------------------------

    def _server_host(self) -> str:
        """Where the live server listens as the host reaches it: its loopback, or a Slurm job's head node."""
        watch = self._watch
        record = watch.record if watch is not None else self._record
        return (record.server_host if record is not None else "") or "127.0.0.1"

    def _grace(self, mode: str) -> float:
        try:
            return self.config.mode(mode).stop_timeout
        except SpecdashError:
            return 30.0

    def _modes_event(self) -> ModesChanged:
        status = self._status
        modes = tuple(
            ModeInfo(
                m.name,
                m.engine,
                m.description,
                self._resident.get(m.name, "resident") if self._is_resident(m.name) else "",
            )
            for m in self.config.modes.values()
            if m.name not in self._hidden_modes or m.name == status.mode
        )
        if status.mode and status.mode not in self.config.modes and status.origin is Origin.ADOPTED:
            # A server started by hand that matches no configured mode: shown as unmanaged, with its flags.
            flags = " ".join(arg for arg in status.command if arg.startswith("--"))
            modes += (ModeInfo(status.mode, status.engine, f"unmanaged (adopted) {flags}".rstrip()),)
        return ModesChanged(modes, status.mode or None)

    def _is_resident(self, mode: str) -> bool:
        cfg = self.config.modes.get(mode)
        return cfg is not None and cfg.resident and mode not in self._not_resident

    def _sleep_refused(self, status: ServerStatus) -> None:
        """A resident mode whose engine refused the sleep flags at launch (vLLM's CPU build): said, and the
        mode restarted as a plain server for this session."""
        cfg = self.config.modes.get(status.mode)
        residency = get_engine(cfg.engine).residency if cfg is not None else None
        if cfg is None or residency is None or not self._is_resident(cfg.name) or status.crash is None:
            return
        text = [status.crash.reason, *status.crash.excerpt]
        evidence = next((line for line in text for marker in residency.refused_lines if marker in line), None)
        if evidence is None:
            return
        self._not_resident.add(cfg.name)
        self._set_resident(cfg.name, "")
        self._emit(
            Notice(
                f"{cfg.name}: {cfg.engine} refuses sleep mode on {self.label} ({evidence.strip()[:160]}): "
                "restarting it as a plain server (not resident)",
                "warning",
                bell=True,
            )
        )
        self._plain_restart = asyncio.create_task(self._restart_plain(cfg.name), name=f"plain-{cfg.name}")

    async def _restart_plain(self, mode: str) -> None:
        if self._watch_task is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self._watch_task), 15.0)
        await self.switch(mode)

    def _set_status(self, status: ServerStatus) -> None:
        if status.phase is Phase.CRASHED and self._status.phase is not Phase.CRASHED:
            self._sleep_refused(status)
        mode_changed = status.mode != self._status.mode
        self._status = status
        self._emit(status)
        if mode_changed:
            self._emit(self._modes_event())
        waiter, self._changed = self._changed, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _status_changed(self) -> None:
        if self._changed is None or self._changed.done():
            self._changed = asyncio.get_running_loop().create_future()
        await self._changed

    def _emit(self, event: SessionEvent | ConnectionEvent) -> None:
        for listener in list(self._listeners):
            listener(event)

    async def _relay_connection_events(self) -> None:
        while True:
            event = await self._queue.get()
            sweep = self._sweep
            if sweep is not None:
                if isinstance(event, Lost):
                    sweep.link_lost(event.reason or "connection lost")
                elif isinstance(event, Connected):
                    sweep.link_restored()
                elif isinstance(event, Failed):
                    sweep.stop(f"link failed: {event.error.message}")
            self._emit(event)


@contextlib.asynccontextmanager
async def running(session: RemoteSession, listener: Listener | None = None) -> AsyncIterator[RemoteSession]:
    """Run `session` (connected, attached to the live run if any) for the block; close it after.

    The server on the host is left as it is. Raises the connection error when the first connect fails.
    """
    if listener is not None:
        session.subscribe(listener)
    runner = asyncio.create_task(session.run(), name="session")
    attached = asyncio.create_task(session.attached.wait())
    try:
        await asyncio.wait({runner, attached}, return_when=asyncio.FIRST_COMPLETED)
        if runner.done():
            runner.result()
        yield session
    finally:
        attached.cancel()
        await asyncio.gather(attached, return_exceptions=True)
        await session.close()
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
