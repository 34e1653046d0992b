"""What a tune measures: the plan (settings in convergence order, levels, passes), built one way for the
CLI's flags and a `[tune.NAME]` entry, and the per-setting modes and seeds its restarts run.

**Modes.** A candidate is the base mode with the engine's draft flags replaced (`NAME@s3-k4-d8`); the
baseline is the configured baseline mode, measured like a candidate in every pass. Every restart runs
with its own engine seed (`seeded_args`: SGLang `--random-seed`, vLLM `--seed`, derived from the
candidate and the pass, so a resumed restart gets the same one): repeats are independent samples.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import Any

from specdash.config import Config, ModeConfig, TuneConfig
from specdash.core import tune as core
from specdash.core.events import TuneEntry
from specdash.core.levels import parse_levels
from specdash.core.spec_export import vllm_mode_args, vllm_speculative_config
from specdash.engines.spec_settings import (
    SGLANG_DRAFT_FLAGS,
    SpecSetting,
    Verdict,
    check_sglang,
    check_vllm,
    sglang_flags,
    strip_flags,
)
from specdash.errors import SpecdashError, UsageError

JOURNAL_VERSION = 2
SEED_FLAGS = {"sglang": "--random-seed", "vllm": "--seed"}
"""The engine's own seed flag (SGLang's server_args `random_seed`, vLLM's EngineArgs `seed`)."""


def restart_seed(candidate: str, repeat: int) -> int:
    """A stable seed per (candidate, pass): distinct restarts draw independently, a resumed one repeats."""
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
