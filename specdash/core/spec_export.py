"""A tuned speculation policy in each engine's own words: launch flags, config JSON, batch-size schedules.

Only what the engine accepts, by version:

* **vLLM.** `--speculative-config` JSON (`method`, `model`, `num_speculative_tokens`, and for n-gram
  `prompt_lookup_max`) for the best fixed setting. A batch-size schedule goes in the same JSON as
  `num_speculative_tokens_per_batch_size`: a list of `[range_start, range_end, k]` with inclusive ranges,
  the first starting at 1, non-overlapping, k >= 0 (0 = no speculation), each k capped at
  `num_speculative_tokens` (`vllm/v1/spec_decode/dynamic/utils.py`,
  `validate_and_normalize_dynamic_sd_schedule`; present in vLLM 0.32). Older versions have no schedule
  (their `disable_by_batch_size` key was unused in V1 and removed by vllm#35060).
* **SGLang.** The three draft flags for the best fixed setting (all versions). v0.5.6 has no dynamic
  form: no flag turns speculation off above a batch size. HEAD has `--speculative-adaptive` (sglang#21599,
  2026-04-21; EAGLE/EAGLE3 with topk = 1 only) with `--speculative-adaptive-config FILE` mapping batch-size
  tiers to candidate steps, where step 0 (drafting off) needs sglang#23994 (2026-06-15). The tier file is
  written as `{"<batch size>": {"candidate_steps": [n]}}` after the HEAD docs' description
  (reference/engines.md); check it against the installed version's `adaptive_spec_params.py`.
* **The simulator** (`specdash sim`, SGLang's flags) models the field's dynamic-disable patch as
  `--sim-disable-spec-above N`: speculate while the running batch is at most N.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from specdash.config import ModeConfig
from specdash.core.tune import BASELINE, Policy
from specdash.engines.spec_settings import SGLANG_DRAFT_FLAGS, SpecSetting, sglang_flags, strip_flags

VLLM_SCHEDULE_VERSION = (0, 32)
"""First vLLM version we know accepts `num_speculative_tokens_per_batch_size`."""
SGLANG_ADAPTIVE_FLAG = "--speculative-adaptive"
SIM_DISABLE_FLAG = "--sim-disable-spec-above"
MAX_BATCH = 4096
"""The schedule's last range ends here (vLLM clamps it to `max_num_seqs`)."""


def _version(text: str) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in text.lstrip("v").split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def vllm_speculative_config(base_args: Sequence[str]) -> dict[str, object]:
    """The `--speculative-config` JSON of a vLLM mode's arguments (empty if none)."""
    args = list(base_args)
    for i, arg in enumerate(args):
        if arg in ("--speculative-config", "-sc") and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith("--speculative-config="):
            value = arg.split("=", 1)[1]
        else:
            continue
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}


def vllm_config_for(base_args: Sequence[str], setting: SpecSetting) -> dict[str, object]:
    """The base mode's speculative config with `setting`'s k (and prompt_lookup_max) in it."""
    spec = dict(vllm_speculative_config(base_args))
    spec["num_speculative_tokens"] = setting.k
    if setting.lookup_max is not None:
        spec["prompt_lookup_max"] = setting.lookup_max
        spec.setdefault("prompt_lookup_min", 1)
        spec["prompt_lookup_min"] = min(int(str(spec["prompt_lookup_min"])), setting.lookup_max)
    return spec


def vllm_mode_args(base_args: Sequence[str], setting: SpecSetting) -> tuple[str, ...]:
    """The base mode's arguments with `--speculative-config` replaced for `setting`."""
    rest = strip_flags(tuple(base_args), ("--speculative-config", "-sc"))
    return (*rest, "--speculative-config", json.dumps(vllm_config_for(base_args, setting)))


def vllm_schedule(policy: Policy, ks: Mapping[str, int]) -> list[list[int]]:
    """`num_speculative_tokens_per_batch_size` for `policy` (`ks`: candidate label -> its k).

    Each policy range becomes `[low, high, k]` (k = 0 for "no speculation"); adjacent ranges with the same
    k merge; the open top range ends at MAX_BATCH.
    """
    out: list[list[int]] = []
    for r in policy.ranges:
        k = 0 if r.choice == BASELINE else ks[r.choice]
        high = r.high if r.high is not None else MAX_BATCH
        if out and out[-1][2] == k:
            out[-1][1] = high
        else:
            out.append([r.low, high, k])
    return out


def validate_vllm_schedule(schedule: Sequence[Sequence[int]]) -> None:
    """vLLM's own checks (`validate_and_normalize_dynamic_sd_schedule`); raises ValueError like it does."""
    if not schedule:
        raise ValueError("num_speculative_tokens_per_batch_size must not be empty.")
    previous_end = 0
    for entry in sorted(schedule, key=lambda e: e[0]):
        if len(entry) != 3:
            raise ValueError("Each entry must be a 3-item sequence: (range_start, range_end, num_speculative_tokens).")
        start, end, k = entry
        if start <= 0 or end <= 0 or start > end or k < 0:
            raise ValueError(f"bad range {tuple(entry)}")
        if start <= previous_end:
            raise ValueError("Batch-size ranges must be non-overlapping and sorted.")
        previous_end = end
    if min(e[0] for e in schedule) != 1:
        raise ValueError("The first batch-size range must start at 1.")


@dataclass(frozen=True)
class Export:
    """One way to run the tuned policy."""

    kind: str
    """`fixed` (one setting for every load) or `dynamic` (changes with the batch size)."""
    engine: str
    """`sglang`, `vllm` or `sim`."""
    args: tuple[str, ...]
    """The mode's full engine arguments."""
    needs: str
    """Which engine version accepts it."""
    note: str = ""
    """Caveats."""

    def to_json(self) -> dict[str, object]:
        """Plain data."""
        return {"kind": self.kind, "engine": self.engine, "args": list(self.args), "needs": self.needs,
                "note": self.note}  # fmt: skip


def exports(base: ModeConfig, policy: Policy, settings: Mapping[str, SpecSetting], simulated: bool) -> list[Export]:
    """The fixed and (where the engine has one) dynamic forms of `policy` for `base`'s engine."""
    if policy.fixed is None:
        return []
    fixed = settings[policy.fixed]
    out: list[Export] = []
    threshold = policy.disable_above
    if base.engine == "sglang":
        args = (*strip_flags(base.args, (*SGLANG_DRAFT_FLAGS, SIM_DISABLE_FLAG)), *sglang_flags(fixed))
        out.append(Export("fixed", "sglang", args, "every SGLang version"))
        if simulated and threshold is not None:
            out.append(
                Export(
                    "dynamic",
                    "sim",
                    (*args, SIM_DISABLE_FLAG, str(threshold)),
                    "specdash sim (the field's dynamic-disable patch)",
                    f"speculation off while more than {threshold} requests run",
                )
            )
        if fixed.topk == 1 and threshold is not None:
            tiers = {"1": {"candidate_steps": [fixed.steps]}, str(threshold + 1): {"candidate_steps": [0]}}
            out.append(
                Export(
                    "dynamic",
                    "sglang",
                    (*args, SGLANG_ADAPTIVE_FLAG, "--speculative-adaptive-config", "adaptive.json"),
                    "SGLang HEAD >= 2026-06-15 (sglang#21599 --speculative-adaptive, sglang#23994 step 0); not v0.5.6",
                    "adaptive.json: " + json.dumps(tiers),
                )
            )
    else:
        spec = vllm_config_for(base.args, fixed)
        rest = strip_flags(base.args, ("--speculative-config", "-sc"))
        out.append(Export("fixed", "vllm", (*rest, "--speculative-config", json.dumps(spec)), "every vLLM V1"))
        ks = {label: s.k or 0 for label, s in settings.items()}
        schedule = vllm_schedule(policy, ks)
        if len(schedule) > 1 or schedule[0][2] != ks[policy.fixed]:
            dyn = dict(spec)
            dyn["num_speculative_tokens"] = max(k for _, _, k in schedule)
            dyn["num_speculative_tokens_per_batch_size"] = schedule
            out.append(
                Export(
                    "dynamic",
                    "vllm",
                    (*rest, "--speculative-config", json.dumps(dyn)),
                    "vLLM >= 0.32 (num_speculative_tokens_per_batch_size)",
                )
            )
    return out


def engine_accepts(export: Export, version: str) -> bool:
    """Whether the installed engine `version` accepts `export` (unknown version: assume it does)."""
    v = _version(version)
    if not v:
        return True
    if export.engine == "vllm" and export.kind == "dynamic":
        return v >= VLLM_SCHEDULE_VERSION
    if export.engine == "sglang" and export.kind == "dynamic":
        return v > (0, 5, 6)
    return True


def mode_toml(name: str, base: ModeConfig, export: Export) -> str:
    """A `[modes.NAME]` table for the config file (values as TOML basic strings)."""

    def q(text: str) -> str:
        return json.dumps(text)  # a JSON string is a valid TOML basic string for these values

    lines = [
        f"[modes.{q(name)}]",
        f"engine = {q(base.engine)}",
        f"model = {q(base.model)}",
        f"port = {base.port}",
        "args = [" + ", ".join(q(a) for a in export.args) + "]",
        f"description = {q('tuned ' + export.kind + ': ' + export.needs)}",
    ]
    if base.launcher:
        lines.append("launcher = [" + ", ".join(q(a) for a in base.launcher) + "]")
    if base.env:
        lines.append("env = { " + ", ".join(f"{q(k)} = {q(v)}" for k, v in base.env.items()) + " }")
    if base.stop_timeout != 30.0:
        lines.append(f"stop_timeout = {base.stop_timeout}")
    return "\n".join(lines) + "\n"


def shell_line(args: Sequence[str]) -> str:
    """`args` quoted for a shell."""
    return shlex.join(args)
