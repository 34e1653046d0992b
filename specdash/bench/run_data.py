"""Stored runs loaded for the reports (`compare`, `runs`, `report`): per level the figures they show.

The levels come from the store's `levels.result` JSON (`LevelResult.to_json`); an SLO given now is judged
against the stored request samples, so any stored run can be re-judged against any SLO.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specdash.bench.provenance import differences
from specdash.bench.store import RunRecord, Store
from specdash.bench.summary import outcomes
from specdash.core.acceptance import accept_alarm, is_speculative
from specdash.core.pareto import ParetoPoint, gpu_count, points_for
from specdash.core.verdict import verdict
from specdash.errors import UsageError
from specdash.slo import LevelSlo, Slo, evaluate_level, goodput_curve, max_concurrency_meeting


def _p(stats: Mapping[str, Any], key: str, pct: str) -> float | None:
    v = (stats.get(key) or {}).get(pct)
    return None if v is None else float(v)


@dataclass(frozen=True)
class LevelData:
    """One finished level of a stored run."""

    concurrency: int
    """Nominal C."""
    status: str
    """`done` or `failed`."""
    tok_s: float
    """Steady-state aggregate output tok/s."""
    stats: Mapping[str, Any]
    """The client's stats (`LevelStats` as JSON)."""
    server: Mapping[str, Any]
    """The server's view (`ServerView` as JSON)."""
    warnings: tuple[str, ...]
    """The level's warnings."""
    slo: LevelSlo | None = None
    """The level against the SLO asked for."""
    reason: str = ""
    """Why a failed level failed (e.g. `server crashed: RuntimeError: ...`), as stored."""

    def pct(self, key: str, pct: str = "p50") -> float | None:
        """A percentile of a latency stat, e.g. `pct("ttft_ms", "p90")`."""
        return _p(self.stats, key, pct)

    @property
    def accept_length(self) -> float | None:
        """The server's mean acceptance length, else the client's."""
        v = self.server.get("accept_length") or self.stats.get("accept_length")
        return None if v is None else float(v)


@dataclass(frozen=True)
class RunData:
    """A stored run with its finished levels."""

    record: RunRecord
    """The run row."""
    levels: tuple[LevelData, ...]
    """Finished levels (done or failed) in the order they ran."""

    @property
    def id(self) -> int:
        """Run id."""
        return self.record.id

    @property
    def mode(self) -> str:
        """Mode name."""
        return self.record.meta.mode

    @property
    def provenance(self) -> Mapping[str, Any]:
        """Stored provenance (empty for runs from before it was recorded)."""
        return self.record.meta.provenance or {}

    @property
    def workload(self) -> Mapping[str, Any]:
        """The workload; for old runs rebuilt from the run's own columns."""
        w = self.provenance.get("workload")
        if w:
            return dict(w)
        m = self.record.meta
        return {
            "prompt_set": m.prompt_set,
            "prompt_hash": m.prompt_hash,
            "endpoint": m.endpoint,
            "output_len": m.output_len,
        }

    @property
    def gpus(self) -> int:
        """TP x DP of the mode (1 when unknown)."""
        argv = self.provenance.get("command") or ()
        return gpu_count(self.record.meta.server_args, [str(a) for a in argv])

    @property
    def speculative(self) -> bool:
        """The mode runs speculative decoding (from its server args or command line)."""
        argv = self.provenance.get("command") or ()
        return is_speculative(self.record.meta.server_args, [str(a) for a in argv])

    def curve(self) -> dict[int, float]:
        """C -> tok/s over levels that finished."""
        return {lv.concurrency: lv.tok_s for lv in self.levels if lv.status == "done"}

    def failures(self) -> dict[int, str]:
        """C -> why, for the levels that failed (a crash stands here: it is not left out)."""
        return {lv.concurrency: lv.reason or "failed" for lv in self.levels if lv.status == "failed"}

    def pareto(self, tpot_pct: str = "p50") -> list[ParetoPoint]:
        """One point per finished level."""
        rows = [(lv.concurrency, lv.tok_s, lv.pct("tpot_ms", tpot_pct)) for lv in self.levels if lv.status == "done"]
        return points_for(self.mode, rows, self.gpus)

    def goodput(self) -> dict[int, float]:
        """C -> token goodput (empty without an SLO)."""
        return goodput_curve(lv.slo for lv in self.levels if lv.slo is not None)

    def capacity(self) -> int | None:
        """The largest C meeting the SLO (None without one, or when the lowest level misses)."""
        return max_concurrency_meeting(lv.slo for lv in self.levels if lv.slo is not None)


def load_run(store: Store, run_id: int, slo: Slo | None = None) -> RunData:
    """One run; a `UsageError` naming the store when there is no such run."""
    rec = store.run(run_id)
    if rec is None:
        raise UsageError(f"no run {run_id} in {store.path} (see 'specdash runs')")
    levels = []
    for lv in store.levels(run_id):
        st = lv.result.get("stats")
        # A failed level stays even without figures (the server crashed before the probe summed it up).
        if lv.status not in ("done", "failed") or (not st and lv.status == "done"):
            continue
        judged = None
        if slo is not None and st:
            judged = evaluate_level(outcomes(store.samples(run_id, lv.id)), lv.concurrency, float(st["wall_s"]), slo)
        levels.append(
            LevelData(
                concurrency=lv.concurrency,
                status=lv.status,
                tok_s=float(st["output_tok_s"]) if st else 0.0,
                stats=st or {},
                server=lv.result.get("server") or {},
                warnings=tuple(lv.result.get("warnings") or ()),
                slo=judged,
                reason=lv.abort_reason or "",
            )
        )
    return RunData(rec, tuple(levels))


def load_runs(store: Store, run_ids: Sequence[int], slo: Slo | None = None) -> list[RunData]:
    """Several runs, in the order given."""
    return [load_run(store, i, slo) for i in run_ids]


def series_names(runs: Sequence[RunData]) -> list[str]:
    """One name per run: the mode, or `mode#id` when a mode appears more than once."""
    modes = [r.mode for r in runs]
    return [r.mode if modes.count(r.mode) == 1 else f"{r.mode}#{r.id}" for r in runs]


def runs_verdict(runs: Sequence[RunData], slo: Slo | None = None) -> str:
    """The verdict over `runs` (the first is the reference), with the SLO's capacity and goodput crossover."""
    names = series_names(runs)
    curves = {n: r.curve() for n, r in zip(names, runs, strict=True)}
    if slo is None:
        return verdict(curves)
    return verdict(
        curves,
        slo_text=slo.text,
        capacity={n: r.capacity() for n, r in zip(names, runs, strict=True)},
        goodput={n: r.goodput() for n, r in zip(names, runs, strict=True)},
    )


def alarms(runs: Sequence[RunData]) -> list[str]:
    """Failed levels with their reason (a crash mid-sweep stands here, first), then acceptance alarms for
    speculative runs whose drafts are almost never accepted."""
    names = series_names(runs)
    out = [f"{n} C={c} failed: {why}" for n, r in zip(names, runs, strict=True) for c, why in r.failures().items()]
    for name, r in zip(names, runs, strict=True):
        if r.speculative or any(lv.accept_length for lv in r.levels):
            a = accept_alarm(name, [lv.accept_length for lv in r.levels])
            if a is not None and r.speculative:
                out.append(a)
    return out


def workload_mismatches(runs: Sequence[RunData]) -> list[str]:
    """Per run whose workload differs from the first run's: `run 7 vs run 3: output_len: 128 vs 256`."""
    out = []
    for r in runs[1:]:
        diff = differences(runs[0].workload, r.workload)
        if diff:
            out.append(f"run {r.id} vs run {runs[0].id}: " + "; ".join(diff))
    return out


def check_workloads(runs: Sequence[RunData], force: bool) -> list[str]:
    """The mismatches; a `UsageError` listing them unless `force` (then the caller marks the output)."""
    bad = workload_mismatches(runs)
    if bad and not force:
        raise UsageError(
            "the runs' workloads differ, so their figures are not like for like:\n  "
            + "\n  ".join(bad)
            + "\n(--force compares them anyway, marked)"
        )
    return bad
