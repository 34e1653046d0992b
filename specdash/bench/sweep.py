"""A concurrency sweep of one mode against one server: warmup, levels, the server's view, the store.

`run_sweep(base_url, config, prompts, store, on_progress, on_level_done)` is the whole headless bench; the
SSH layer only has to provide `base_url` (a local port forward) and restart the server between modes.

Per level C (default levels 1, 2, 5, 10, 20, 50, 100, capped by `max_concurrency`):

1. optional `/flush_cache` (SGLang; only effective while idle, so it is sent between levels);
2. warmup: one unmeasured wave of C short requests (opens C keep-alive connections, so the level does not
   measure TCP connects; SGLang's bench uses 1 warmup request, vLLM's 0);
3. the level: C closed-loop streams until `requests_per_level` (default max(5 x C, 10)) requests were sent,
   or for `duration_s`; bounded by `level_timeout_s` either way. Prompts go out in the same order in every
   mode (request i uses prompt i mod len), whatever the number of probe processes;
4. `/metrics` before, during (every `metrics_poll_s`) and after, `/server_info` after: the server's view;
5. summary, warnings (client vs server > 10 %, server caps, client-limited), stored, `on_level_done`.

A level whose streams all hit refused/reset connections is stopped and marked failed, and the sweep ends:
the server died. A warm-up in which no request succeeded fails its level there (stored as failed, with no
samples): a dead server costs one warm-up, not a warm-up and a level. Finished levels are kept (they are
in the store already).

The link to the server is the caller's business (an SSH forward): the caller reports `link_lost()` and
`link_restored()`. A loss stops sending at once; the requests in flight fail on their own (the forward's
channels close) and are stored with their reason. The level in flight is then `interrupted` in the store.
With `on_link_loss="pause"` the sweep waits up to `link_wait_s` for the link and runs that level again from
its warmup (a level measured across an outage would mix two steady states); with `"stop"` it ends.

With the probe on the host the link is not on the measurement's path: a loss does not stop the level. The
agent measures on, the runner waits up to `link_wait_s` (policy `pause`; none with `stop`) and resumes its
records after the last one stored, and the level is kept whole; only a runner that gave up (the link not
back in time) makes the attempt `interrupted`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from specdash.bench.headroom import Load, evidence, judge
from specdash.bench.hostprobe import AgentUnavailable, HostProbe
from specdash.bench.probe import Headroom, LevelOutcome, LevelPlan, Probe, ProbeSettings
from specdash.bench.prompts import PromptSet
from specdash.bench.provenance import build as build_provenance
from specdash.bench.samples import CONNECTION_FAILURES, RequestSample
from specdash.bench.server_view import ServerClient, level_view, running_cap, warnings_for
from specdash.bench.sse import Endpoint
from specdash.bench.store import RunMeta, Store
from specdash.bench.summary import in_flight_at_loss, summarize
from specdash.bench.summary import outcomes as slo_outcomes
from specdash.bench.sweep_data import (
    DEFAULT_LEVELS,
    MAX_LEVEL,
    MAX_LEVEL_ATTEMPTS,
    LevelResult,
    SweepConfig,
    SweepResult,
    url_origin,
    validate_levels,
    validate_url,
)
from specdash.bench.workers import LevelSink, ProbePool, processes_for, split_level
from specdash.core.acceptance import is_speculative
from specdash.core.events import BenchTick
from specdash.core.guards import sweep_guards
from specdash.core.series import RateWindow
from specdash.engines.registry import identify
from specdash.redact import redact_url
from specdash.slo import evaluate_level

__all__ = [
    "DEFAULT_LEVELS",
    "MAX_LEVEL",
    "LevelResult",
    "Sweep",
    "SweepConfig",
    "SweepResult",
    "run_sweep",
    "validate_levels",
    "validate_url",
]

PARENT_TICK_S = 0.05
"""How often the sweep's own process checks its event-loop lag during a level (it carries the SSH forward)."""
PARENT_TICK_HOST_S = 0.25
"""The same with the probe on the host: the link is off the measurement's path, so this lag can only say that
the UI lagged, and 20 wake-ups a second were a tenth of specdash's own CPU there."""

ProgressCallback = Callable[[BenchTick], Awaitable[None] | None]
LevelCallback = Callable[[LevelResult], Awaitable[None] | None]


class _ParentLoad:
    """The sweep's own process during a level: CPU share and event-loop lag.

    With probe worker processes, this process only collects samples, but it also carries the SSH port
    forward (asyncssh, about 100 µs of CPU per streamed event on a 2-core machine) and, under the dashboard,
    the UI. If it saturates, the forward delays every stream: the level is then client-limited too.
    """

    def __init__(self, tick_s: float = PARENT_TICK_S) -> None:
        self._tick_s = tick_s
        self._lags: list[float] = []
        self._task: asyncio.Task[None] | None = None
        self._t0 = 0.0
        self._cpu0 = 0.0

    def start(self) -> None:
        self._t0, self._cpu0 = time.perf_counter(), time.process_time()
        self._task = asyncio.create_task(self._watch())

    async def _watch(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(self._tick_s)
            self._lags.append((time.perf_counter() - before - self._tick_s) * 1000)

    async def stop(self) -> Headroom:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        wall = max(1e-9, time.perf_counter() - self._t0)
        lags = sorted(self._lags) or [0.0]
        p90, p99 = (lags[min(len(lags) - 1, int(q * len(lags)))] for q in (0.90, 0.99))
        return Headroom((time.process_time() - self._cpu0) / wall, p99, lags[-1], 0.0, 0, p90)


def _load(h: Headroom) -> Load:
    return Load(h.cpu_share, h.loop_lag_p90_ms, h.loop_lag_p99_ms)


async def _call(cb: Callable[[Any], Awaitable[None] | None] | None, arg: Any) -> None:
    if cb is not None:
        res = cb(arg)
        if res is not None:
            await res


async def _identify(server: ServerClient, info: Mapping[str, Any] | None) -> tuple[str, str]:
    """(engine, version) from what the server exposes: each engine tells its own answers (`engines.registry`);
    the version from `/server_info`, else `/version`."""
    engine = identify(info, await server.models())
    version = str((info or {}).get("version", "")) or (await server.version() or "" if engine else "")
    return engine, version


class _AsWorker:
    """The probe's `Sink` as probe `worker` of a `LevelSink`: the in-process path calls the level directly."""

    def __init__(self, sink: LevelSink, worker: int) -> None:
        self._sink = sink
        self._worker = worker

    def sample(self, sample: RequestSample) -> None:
        self._sink.sample(self._worker, sample)

    def tick(self, arrivals: list[tuple[int, int]], inflight: int, now_ns: int) -> None:
        self._sink.tick(self._worker, arrivals, inflight, now_ns)


class _WarmUp:
    """The warm-up's `LevelSink`: its samples are dropped; only whether any succeeded, and the last error."""

    def __init__(self) -> None:
        self.ok = 0
        self.last_error = ""

    def sample(self, worker: int, sample: RequestSample) -> None:
        if sample.ok:
            self.ok += 1
        elif sample.error is not None:
            self.last_error = f"{sample.error.value}: {sample.detail[:120]}"

    def tick(self, worker: int, arrivals: list[tuple[int, int]], inflight: int, now_ns: int) -> None:
        pass

    def gauges(self, values: dict[str, float]) -> None:
        pass


class _InProcess:
    """The runner for `processes=0`: the probe in the caller's event loop (tests, embedding)."""

    def __init__(self, base_url: str, settings: ProbeSettings, prompts: tuple[str, ...]) -> None:
        self._probe = Probe(base_url, settings, prompts)
        self._entered = False

    async def run_level(self, plans: list[LevelPlan], sink: LevelSink) -> list[LevelOutcome | None]:
        if not self._entered:
            await self._probe.__aenter__()
            self._entered = True
        merged = dataclasses.replace(
            plans[0], concurrency=sum(p.concurrency for p in plans), index_step=1, first_index=0
        )
        return [await self._probe.run_level(merged, _AsWorker(sink, 0))]

    def abort(self, reason: str) -> None:
        self._probe.stop(reason)

    async def close(self) -> None:
        if self._entered:
            await self._probe.__aexit__(None, None, None)


class Sweep:
    """Runs the levels of one mode against `base_url` and reports as it goes."""

    def __init__(
        self,
        base_url: str,
        config: SweepConfig,
        prompts: PromptSet,
        store: Store | None = None,
        *,
        run_meta: RunMeta | None = None,
        on_progress: ProgressCallback | None = None,
        on_level_done: LevelCallback | None = None,
        check_link: Callable[[], Awaitable[bool]] | None = None,
        link_in_process: bool = False,
        host_runner: Callable[[ProbeSettings, tuple[str, ...]], HostProbe] | None = None,
        on_warning: Callable[[str], None] | None = None,
    ) -> None:
        """Prepare a sweep (nothing is sent until `run`).

        Args:
            base_url: The server, e.g. the local end of an SSH port forward.
            config: Levels, counts, probe settings.
            prompts: The prompt set (the same in every mode).
            store: Where runs, levels and samples go; None keeps them in memory only.
            run_meta: Identity of the run (host, engine, server args); defaults from the URL and config.
            on_progress: Called about once a second during a level.
            on_level_done: Called after each level.
            check_link: Asked, when a level's requests failed, whether the link to the server still works
                (a cut link is declared lost only after keepalive, possibly after the level gave up);
                False counts as a link loss.
            link_in_process: This process carries the link to `base_url` (an SSH port forward): its own
                event-loop lag then delays the streams (see `specdash.bench.headroom`).
            host_runner: Makes the runner of a probe on the server's host (`specdash.bench.agent`); when
                the host cannot run it, the sweep falls back to the local probe and records why.
            on_warning: Called before the first level with each guard warning (`core.guards`).
        """
        self.base_url = validate_url(base_url)
        self.config = config
        self.levels = config.effective_levels()
        self.prompts = prompts
        self.store = store
        self.run_meta = run_meta
        self.on_progress = on_progress
        self.on_level_done = on_level_done
        self.check_link = check_link
        self.link_in_process = link_in_process
        self.host_runner = host_runner
        self.probe: dict[str, str] = {"where": "local", "why": "the server is reached directly"}
        """Where the probe runs and why (stored with the run, in `SweepResult.probe`)."""
        self.on_warning = on_warning
        self.guards: list[str] = []
        """Warnings from the checks before the sweep (`core.guards`), also stored in the run's provenance."""
        self._stop: str | None = None
        self._stopped = asyncio.Event()
        self._link_down: str | None = None
        self._link_losses = 0
        self._link_back = asyncio.Event()
        self._link_back.set()
        self.interruptions: list[tuple[int, str]] = []
        """(concurrency, reason) of every level attempt a link loss interrupted."""
        self._runner: ProbePool | _InProcess | HostProbe | None = None
        self._procs = 1
        self._level_fatal = False  # the last level failed for a reason that ends the sweep
        self._level_id: int | None = None
        self.run_id: int | None = None
        """The stored run's id once the sweep has created it (a crash noted after the sweep goes there)."""

    def stop(self, reason: str = "stopped by user") -> None:
        """Stop after in-flight requests finish; the current level is marked failed."""
        self._stop = reason
        self._stopped.set()
        if self._runner is not None:
            self._runner.abort(reason)

    def link_lost(self, reason: str) -> None:
        """The link to the server dropped: send nothing more until `link_restored()` (see the module doc)."""
        self._link_down = reason
        self._link_losses += 1
        self._link_back.clear()
        if self._runner is not None and not self._on_host:
            self._runner.abort(f"link lost: {reason}")

    @property
    def _on_host(self) -> bool:
        """The probe runs on the server's host (a link loss does not touch its requests)."""
        return self._runner is not None and not isinstance(self._runner, (ProbePool, _InProcess))

    def link_restored(self) -> None:
        """The link is back (and the forward listens again): a paused sweep goes on."""
        self._link_down = None
        self._link_back.set()

    async def _wait_link(self, mode: str, c: int) -> str | None:
        """None once the link is up (at once if it is); else why the sweep must end."""
        reason = self._link_down
        if reason is None:
            return None
        cfg = self.config
        if cfg.on_link_loss == "stop":
            return f"link lost: {reason}"
        await _call(self.on_progress, BenchTick(mode, c, 0.0, 0.0, 0, None, phase="paused"))
        back = asyncio.ensure_future(self._link_back.wait())
        stopped = asyncio.ensure_future(self._stopped.wait())
        try:
            await asyncio.wait({back, stopped}, timeout=cfg.link_wait_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            back.cancel()
            stopped.cancel()
        if self._stop is not None:
            return self._stop
        if self._link_down is not None:
            return f"link lost: {reason}; not back after {cfg.link_wait_s:g} s"
        return None

    async def run(self) -> SweepResult:
        """Run every level; returns what was measured (also in the store, level by level)."""
        cfg = self.config
        async with ServerClient(self.base_url) as server:
            info = await server.server_info()
            engine, version = await _identify(server, info)
            # vLLM has no /generate: with `endpoint_follows_engine` the mode's engine (else the identified one) picks.
            settings = cfg.settings_for((self.run_meta.engine if self.run_meta else "") or engine)
            if settings.endpoint is not Endpoint.GENERATE and settings.model is None:
                settings = dataclasses.replace(settings, model=await server.model_id())
            settings = dataclasses.replace(settings, max_streams=max(settings.max_streams, max(self.levels)))
            self._runner = await self._make_runner(settings)
            self.guards = self._guards(info)
            if self.host_runner is not None and self.probe["where"] == "local":
                self.guards.append(f"probe on the host unavailable: {self.probe['why']}")  # stored with the run
            for warning in self.guards:
                if self.on_warning is not None:
                    self.on_warning(warning)
            run_id = self.run_id = self._create_run(info, settings, engine, version)
            results: list[LevelResult] = []
            aborted: str | None = None
            finished = False
            try:
                for c in self.levels:
                    if self._stop is not None:
                        aborted = self._stop
                        break
                    result = await self._level_through_outages(c, server, info, run_id)
                    if result is None:
                        aborted = self._stop or f"link lost: {self._link_down}"
                        break
                    results.append(result)
                    await _call(self.on_level_done, result)
                    if result.status == "failed" and self._level_fatal:
                        aborted = result.abort_reason or "level failed"
                        break
                finished = True
            finally:
                # Cancelled (Ctrl-C, the UI closing) or crashed: stored samples stay; the run says so.
                ran_on = getattr(self._runner, "ran_on", None) if self.probe["where"] == "host" else None
                if ran_on:  # where the agent said it ran (a Slurm host: the step on the head node)
                    self.probe.update({f"agent_{key}": value for key, value in ran_on.items()})
                await asyncio.shield(self._runner.close())
                self._runner = None
                if self.store is not None and run_id is not None:
                    status = "interrupted" if not finished else "done" if aborted is None else "failed"
                    self.store.finish_run(run_id, status)
                    if not finished and self._level_id is not None:
                        self.store.finish_level(self._level_id, "interrupted", {}, "interrupted")
        return SweepResult(run_id, tuple(results), aborted, dict(self.probe))

    async def _make_runner(self, settings: ProbeSettings) -> ProbePool | _InProcess | HostProbe:
        """The probe on the host when asked for and possible; else local, with the reason recorded."""
        if self.host_runner is not None:
            runner = self.host_runner(settings, self.prompts.prompts)
            runner.link_wait_s = self.config.link_wait_s if self.config.on_link_loss == "pause" else 0.0
            try:
                python = await runner.prepare()
            except AgentUnavailable as exc:
                self.probe = {"where": "local", "why": str(exc)}
            else:
                self.probe = {"where": "host", "python": python}
                return runner
        if self.config.processes == 0:
            return _InProcess(self.base_url, settings, self.prompts.prompts)
        return ProbePool(self.base_url, settings, self.prompts.prompts)

    async def _level_through_outages(
        self, c: int, server: ServerClient, info: Mapping[str, Any] | None, run_id: int | None
    ) -> LevelResult | None:
        """Run level `c`, again after each link loss that interrupted it (policy `pause`).

        Returns None when the sweep must end before the level could run (link down with policy `stop`, a
        pause longer than `link_wait_s`, or a stop).
        """
        mode = self._mode()
        for _ in range(MAX_LEVEL_ATTEMPTS):
            why = await self._wait_link(mode, c)
            if why is not None:
                self._stop = self._stop or why
                return None
            result = await self._level(c, server, info, run_id)
            if result.status != "interrupted":
                return result
            self.interruptions.append((c, result.abort_reason or "link lost"))
        self._stop = f"level {c} interrupted by link losses {MAX_LEVEL_ATTEMPTS} times"
        return None

    def _guards(self, info: Mapping[str, Any] | None) -> list[str]:
        """The checks before the first level, from `/server_info` and the launch command (`core.guards`)."""
        prov = dict((self.run_meta.provenance if self.run_meta else None) or {})
        argv = [str(a) for a in prov.get("command") or ()]
        args = (self.run_meta.server_args if self.run_meta else None) or info
        return sweep_guards(
            self.levels,
            args,
            argv,
            speculative=is_speculative(args, argv),
            prompts=self.prompts.prompts,
            draft_architectures=[str(a) for a in prov.get("draft_architectures") or ()],
        )

    def _create_run(
        self, info: Mapping[str, Any] | None, settings: ProbeSettings, engine: str, version: str
    ) -> int | None:
        if self.store is None:
            return None
        meta = self.run_meta or RunMeta(host=url_origin(self.base_url), mode=self.config.mode)
        engine = meta.engine or engine
        version = meta.engine_version or version
        server_args = meta.server_args if meta.server_args is not None else info
        cfg = dataclasses.asdict(self.config)
        cfg["settings"] = dataclasses.asdict(settings)
        cfg["probe"] = dict(self.probe)
        cfg["slo"] = None if self.config.slo is None else self.config.slo.spec()
        load = {k: cfg[k] for k in ("requests_per_level", "duration_s", "warmup_requests")}
        provenance = build_provenance(
            self.prompts,
            settings,
            load={"levels": list(self.levels), **load},
            extra={
                **dict(meta.provenance or {}),
                "engine": engine,
                "engine_version": version,
                "slo": cfg["slo"],
                "guards": self.guards,
            },
        )
        meta = dataclasses.replace(
            meta,
            mode=meta.mode or self.config.mode,
            engine=engine,
            engine_version=version,
            server_args=server_args,
            prompt_set=self.prompts.name,
            prompt_hash=self.prompts.sha256,
            endpoint=settings.endpoint.value,
            output_len=settings.output_len,
            base_url=redact_url(self.base_url),
            config=cfg,
            provenance=provenance,
        )
        return self.store.create_run(meta)

    def _plans(self, c: int, total: int | None, **kw: Any) -> list[LevelPlan]:
        cfg = self.config
        if cfg.processes is None:
            procs = max(self._procs, processes_for(c, cfg.streams_per_process, cfg.max_processes))
        else:
            procs = max(1, cfg.processes)
        return split_level(c, procs, total, **kw)

    def _max_seconds(self) -> float:
        cfg = self.config
        if cfg.level_timeout_s is not None:
            return cfg.level_timeout_s
        if cfg.duration_s is not None:
            return cfg.duration_s + cfg.settings.request_timeout_s + 30.0
        return 3600.0

    async def _level(
        self, c: int, server: ServerClient, info: Mapping[str, Any] | None, run_id: int | None
    ) -> LevelResult:
        """One attempt at level `c`: flush, warm-up, the measured level, the server's view, the store."""
        cfg = self.config
        mode = self._mode()
        losses = self._link_losses
        if cfg.flush_cache:
            await server.flush_cache()
        warm_failure = await self._warm_up(mode, c)
        if warm_failure is not None:
            await self._check_link_after_failure(losses)
        if self._link_losses != losses:
            return self._interrupted(mode, c, None)
        level_id = self.store.start_level(run_id, c) if self.store is not None and run_id is not None else None
        self._level_id = level_id
        if warm_failure is not None:
            # A dead server fails the level at its warm-up: no measured request goes to a server not there.
            self._level_fatal = True
            return self._finish(self._failed_result(mode, c, f"warm-up failed: {warm_failure}", level_id))
        before = await server.metrics()
        runner = self._runner
        assert runner is not None
        total, abort_after = cfg.requests_for(c), max(3, c)
        plans = self._plans(
            c,
            total,
            duration_s=cfg.duration_s,
            max_seconds=self._max_seconds(),
            abort_after_connection_failures=abort_after,
        )
        run = _LevelRun(runner, plans, abort_after, cfg, self.store, self.on_progress, mode, c, total, run_id, level_id)
        outcomes, parent = await run.run(server, poll=before is not None)
        if run.failed(outcomes):
            await self._check_link_after_failure(losses)
        resumed = self._on_host and all(o is not None for o in outcomes)  # the agent's records all came
        if self._link_losses != losses and cfg.on_link_loss == "pause" and not resumed:
            return self._interrupted(mode, c, level_id, run.samples)
        after = await server.metrics() if before is not None else None
        info_after = await server.server_info() if info is not None else None
        stats = summarize(run.samples, c)
        view = level_view(before, after, run.polls, stats.wall_s, info_after, running_cap(info))
        headroom = tuple(o.headroom for o in outcomes if o is not None)
        verdict = judge(
            evidence(
                run.samples,
                c,
                stats.window,
                [_load(h) for h in headroom],
                _load(parent) if parent is not None else None,
                # With the probe on the host, this process only receives records: its lag is the UI's alone.
                self.link_in_process and not self._on_host,
                view.max_running,
                view.running_cap,
            )
        )
        limited = verdict.reasons
        reasons = [o.aborted for o in outcomes if o is not None and o.aborted]
        if any(o is None for o in outcomes):
            reasons.append(getattr(self._runner, "last_failure", None) or "a probe process died")
        if self._stop is not None:
            reasons.append(self._stop)
        self._level_fatal = bool(reasons)
        samples = run.samples
        if not reasons and samples and not any(s.ok for s in samples):
            # Every request failed (HTTP errors, malformed streams, timeouts): the level measured nothing.
            # It fails, but the sweep goes on to the next level; only the reasons above end a sweep.
            first = next((s for s in samples if s.detail), samples[0])
            reasons.append(f"all {len(samples)} requests failed (first: {first.detail or first.error})"[:400])
        if limited and cfg.processes is None:
            # Simple rule: a client-limited level doubles the probe processes for the next one (CPU-capped).
            cap = cfg.max_processes or os.cpu_count() or 1
            self._procs = min(cap, max(self._procs, len(outcomes) * 2))
        # Counter deltas cover whole requests, so compare them with the whole-level rate; gauges are decode rates.
        client_rate = stats.output_tok_s_wall if view.tok_s_source.startswith("Δ") else stats.output_tok_s
        warnings = stats.warnings + warnings_for(c, client_rate, view, limited) + verdict.notes
        return self._finish(
            LevelResult(
                mode=mode,
                concurrency=c,
                status="failed" if reasons else "done",
                abort_reason=reasons[0] if reasons else None,
                stats=stats,
                server=view,
                headroom=headroom,
                warnings=warnings,
                level_id=level_id,
                parent=parent,
                client_limits=limited,
                slo=None if cfg.slo is None else evaluate_level(slo_outcomes(run.samples), c, stats.wall_s, cfg.slo),
            )
        )

    def _mode(self) -> str:
        return self.run_meta.mode if self.run_meta and self.run_meta.mode else self.config.mode

    async def _warm_up(self, mode: str, c: int) -> str | None:
        """One unmeasured wave (its samples are dropped); why it failed when no request of it succeeded."""
        cfg = self.config
        n_warm = c if cfg.warmup_requests is None else cfg.warmup_requests
        if n_warm <= 0:
            return None
        runner = self._runner
        assert runner is not None
        await _call(self.on_progress, BenchTick(mode, c, 0.0, 0.0, 0, n_warm, phase="warmup"))
        warm = _WarmUp()
        plans = self._plans(
            min(c, n_warm),
            n_warm,
            output_len=cfg.warmup_output_len,
            max_seconds=self._max_seconds(),
            abort_after_connection_failures=max(3, c),
        )
        outcomes = await runner.run_level(plans, warm)
        if warm.ok > 0:
            return None
        aborted = next((o.aborted for o in outcomes if o is not None and o.aborted), None)
        if any(o is None for o in outcomes):
            aborted = aborted or "a probe process died"
        return aborted or f"none of {n_warm} requests succeeded ({warm.last_error or 'no answer'})"

    async def _check_link_after_failure(self, losses: int) -> None:
        """Requests failed: ask whether the link still works (a cut link is declared lost only after keepalive)."""
        if self._link_losses == losses and self.check_link is not None and self._stop is None:
            if not await self.check_link() and self._link_losses == losses:
                self.link_lost("the connection stopped carrying requests")

    def _failed_result(self, mode: str, c: int, reason: str, level_id: int | None) -> LevelResult:
        stats = summarize([], c)
        view = level_view(None, None, [], 0.0, None, None)
        return LevelResult(mode, c, "failed", reason, stats, view, (), (), level_id)

    def _finish(self, result: LevelResult) -> LevelResult:
        """Store a finished (done or failed) level."""
        if self.store is not None and result.level_id is not None:
            self.store.finish_level(result.level_id, result.status, result.to_json(), result.abort_reason)
        self._level_id = None
        return result

    def _interrupted(
        self, mode: str, c: int, level_id: int | None, samples: list[RequestSample] | None = None
    ) -> LevelResult:
        """A level attempt cut short by a link loss (policy `pause`): stored as `interrupted`, run again."""
        reason = f"link lost: {self._link_down or 'dropped and back'}"
        stats = summarize(samples or [], c)
        if self.store is not None and level_id is not None:
            self.store.finish_level(level_id, "interrupted", {}, reason)
        self._level_id = None
        view = level_view(None, None, [], stats.wall_s, None, None)
        return LevelResult(mode, c, "interrupted", reason, stats, view, (), (), level_id)


class _LevelRun:
    """The measured part of one level (a `LevelSink`): its samples, live rate, metric polls, progress.

    It gets what it uses from its `Sweep` (the runner, the level's plans, the store, the progress callback)
    instead of reaching into the sweep's private state."""

    def __init__(
        self,
        runner: ProbePool | _InProcess | HostProbe,
        plans: list[LevelPlan],
        abort_after: int,
        config: SweepConfig,
        store: Store | None,
        on_progress: ProgressCallback | None,
        mode: str,
        c: int,
        total: int | None,
        run_id: int | None,
        level_id: int | None,
    ) -> None:
        self.runner = runner
        self.plans = plans
        self.config = config
        self.store = store
        self.on_progress = on_progress
        self.mode = mode
        self.c = c
        self.total = total
        self.run_id = run_id
        self.level_id = level_id
        self.samples: list[RequestSample] = []
        self.polls: list[dict[str, float]] = []
        self.abort_after = abort_after
        self._rate = RateWindow(1.0)
        self._last_tick: dict[int, int] = {}
        self._inflight: dict[int, int] = {}
        self._conn_fail_streak = 0
        self._t0 = time.perf_counter_ns()

    async def run(self, server: ServerClient, *, poll: bool) -> tuple[list[LevelOutcome | None], Headroom | None]:
        """Run the level's plans; returns each probe's outcome and the sweep process's own headroom."""
        runner, cfg = self.runner, self.config
        helpers = [asyncio.create_task(self._report())]
        on_host = None if isinstance(runner, (_InProcess, ProbePool)) else runner
        if on_host is not None:
            # The agent reads the server's gauges next to it (`gauges`): no poll crosses the link.
            on_host.metrics_poll_s = cfg.metrics_poll_s if poll else 0.0
        elif poll:
            helpers.append(asyncio.create_task(self._poll(server)))
        local = isinstance(runner, (_InProcess, ProbePool))
        parent = None if isinstance(runner, _InProcess) else _ParentLoad(PARENT_TICK_S if local else PARENT_TICK_HOST_S)
        if parent is not None:
            parent.start()
        self._t0 = time.perf_counter_ns()
        try:
            outcomes = await runner.run_level(self.plans, self)
        finally:
            if on_host is not None:
                on_host.metrics_poll_s = 0.0  # the warm-ups poll nothing
            for h in helpers:
                h.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            parent_headroom = await parent.stop() if parent is not None else None
        return outcomes, parent_headroom

    def failed(self, outcomes: list[LevelOutcome | None]) -> bool:
        """Whether any request failed or any probe stopped early."""
        return any(not s.ok for s in self.samples) or any(o is None or o.aborted for o in outcomes)

    def tick(self, worker: int, arrivals: list[tuple[int, int]], inflight: int, now_ns: int) -> None:
        """`LevelSink`: live credits of one probe."""
        for t, tok in arrivals:
            self._rate.add(t, tok)
        self._inflight[worker] = inflight
        self._last_tick[worker] = now_ns

    def gauges(self, values: dict[str, float]) -> None:
        """`LevelSink`: the server's gauges, read on its host by the agent (a poll that did not cross the link)."""
        self.polls.append(values)

    def sample(self, worker: int, s: RequestSample) -> None:
        """`LevelSink`: a finished request, stored at once (the store's writer thread commits it)."""
        store = self.store
        self.samples.append(s)
        if store is not None and self.level_id is not None and self.run_id is not None:
            store.add_sample(self.run_id, self.level_id, s)
        if s.error in CONNECTION_FAILURES:
            self._conn_fail_streak += 1
            if self._conn_fail_streak >= self.abort_after:
                self.runner.abort(f"server unreachable ({s.error}: {s.detail[:120]})")
        elif s.ok:
            self._conn_fail_streak = 0

    async def _report(self) -> None:
        while True:
            await asyncio.sleep(self.config.progress_interval_s)
            now = min(self._last_tick.values()) if self._last_tick else time.perf_counter_ns()
            failed = sum(1 for s in self.samples if not s.ok)
            at_loss = in_flight_at_loss(self.samples) if failed else None
            progress = BenchTick(
                self.mode,
                self.c,
                (now - self._t0) / 1e9,
                self._rate.rate(now),
                len(self.samples),
                self.total,
                phase="running",
                failed=failed,
                inflight=sum(self._inflight.values()),
                in_flight_at_loss=at_loss,
            )
            await _call(self.on_progress, progress)

    async def _poll(self, server: ServerClient) -> None:
        while True:
            await asyncio.sleep(self.config.metrics_poll_s)
            m = await server.gauges()
            if m is None:
                return
            self.polls.append(m)


async def run_sweep(
    base_url: str,
    config: SweepConfig,
    prompts: PromptSet,
    store: Store | None = None,
    *,
    on_progress: ProgressCallback | None = None,
    on_level_done: LevelCallback | None = None,
    run_meta: RunMeta | None = None,
    on_warning: Callable[[str], None] | None = None,
) -> SweepResult:
    """Run one mode's sweep against `base_url` (see `Sweep`)."""
    sweep = Sweep(
        base_url,
        config,
        prompts,
        store,
        run_meta=run_meta,
        on_progress=on_progress,
        on_level_done=on_level_done,
        on_warning=on_warning,
    )
    return await sweep.run()
