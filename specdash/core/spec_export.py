"""A tuned speculation policy in each engine's own words: launch flags, config JSON, batch-size schedules.

Only what the engine accepts, by version:

* **vLLM.** `--speculative-config` JSON (`method`, `model`, `num_speculative_tokens`, and for n-gram
  `prompt_lookup_max`) for the best fixed setting. A batch-size schedule goes in the same JSON as
  `num_speculative_tokens_per_batch_size`: a list of `[range_start, range_end, k]` with inclusive ranges,
  the first starting at 1, non-overlapping, k >= 0 (0 = no speculation), each k capped at
  `num_speculative_tokens` (`vllm/v1/spec_decode/dynamic/utils.py`,
  `validate_and_normalize_dynamic_sd_schedule`; present in vLLM 0.32). Older versions have no schedule
  (their `disable_by_batch_size` key was unused in V1 and removed by vllm#35060).
* **SGLang.** The three draft flags for the best fixed setting (every version), and a batch-size
  schedule through the adaptive mode where the version has it. SGLang has no flag that turns speculation
  off above a batch size (no `--speculative-disable-by-batch-size`; that was vLLM's V0 flag), and
  `--speculative-accept-threshold-single` / `-acc` change what is accepted (lossy), not when to
  speculate: neither is exported. What each version accepts, as read:

  | form | SGLang | source read |
  |---|---|---|
  | the three draft flags (1) | every version (v0.4.6 on) | `server_args.py` v0.5.6, HEAD copy 001067ff |
  | `--speculative-adaptive`, `--speculative-adaptive-config FILE` (2) | >= 0.5.11 | 0.5.11 docs (3) |
  | batch-size tiers in that file, EAGLE3 too (4) | >= 0.5.13 | 0.5.13 docs (5), HEAD `server_args.py` |
  | step 0 in a tier: drafting off, "no speculation above N" (6) | >= 0.5.14 | `adaptive_spec_params.py` @015c8726 |

  (1) `--speculative-num-steps`, `--speculative-eagle-topk`, `--speculative-num-draft-tokens`: all three or
  none; topk = 1 forces draft = steps + 1 (v0.5.6 argparse section "Speculative decoding"; HEAD dataclass
  fields `speculative_num_steps` ...). (2) sglang#21599: one global `candidate_steps` list, EAGLE with
  topk = 1 only; not in v0.5.6; 0.5.7-0.5.10 not checked, so nothing adaptive is exported for them.
  (3) `docs/advanced_features/adaptive_speculative_decoding.md`. (4) sglang#24055 (2026-06-05): integer-
  string keys are the lower bounds of batch-size ranges. (5) `docs_new/docs/advanced_features/
  adaptive_speculative_decoding.mdx`. (6) sglang#23994, merged 2026-06-15; `_load_adaptive_config` takes
  "non-negative ints". 0.5.13 was taken up downstream on 2026-06-17 and may predate it: not relied on.

  So a policy is exported as tiers only when every range's choice is a topk = 1 setting (or "no
  speculation", which needs step 0); each tier pins one step (`candidate_steps: [n]`), so the EMA has
  nothing to adapt within a tier: it is a schedule. SGLang routes a batch to a tier after padding it
  to its CUDA-graph batch size, so a boundary takes effect at the next captured size.
* **The simulator** (`specdash sim`, SGLang's flags) models the field's dynamic-disable patch as
  `--sim-disable-spec-above N`: speculate while the running batch is at most N.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from specdash.config import ModeConfig
from specdash.core.tune import BASELINE, Policy, build_policy, point
from specdash.engines.spec_settings import SGLANG_DRAFT_FLAGS, SpecSetting, setting_of, sglang_flags, strip_flags

VLLM_SCHEDULE_VERSION = (0, 32)
"""First vLLM version we know accepts `num_speculative_tokens_per_batch_size`."""
SGLANG_ADAPTIVE_VERSION = (0, 5, 11)
"""First SGLang version we read with `--speculative-adaptive` (EAGLE, one global step list)."""
SGLANG_TIERS_VERSION = (0, 5, 13)
"""First SGLang version we read with batch-size tiers in the adaptive config (and EAGLE3)."""
SGLANG_STEP0_VERSION = (0, 5, 14)
"""First SGLang version taken to accept step 0 (drafting off) in a tier (see the module docstring)."""
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
        return {
            "kind": self.kind,
            "engine": self.engine,
            "args": list(self.args),
            "needs": self.needs,
            "note": self.note,
        }


def exports(
    base: ModeConfig,
    policy: Policy,
    settings: Mapping[str, SpecSetting],
    simulated: bool,
    version: str | None = None,
) -> list[Export]:
    """The fixed and (where the engine has one) dynamic forms of `policy` for `base`'s engine.

    With the installed engine's `version`, only the forms it accepts (`engine_accepts`); without, all
    of them, each naming the version it needs.
    """
    out = _exports(base, policy, settings, simulated)
    return out if version is None else [e for e in out if engine_accepts(e, version)]


def _exports(base: ModeConfig, policy: Policy, settings: Mapping[str, SpecSetting], simulated: bool) -> list[Export]:
    if policy.fixed is None:
        return []
    fixed = settings[policy.fixed]
    out: list[Export] = []
    threshold = policy.disable_above
    if base.engine == "sglang":
        args = (*strip_flags(base.args, (*SGLANG_DRAFT_FLAGS, SIM_DISABLE_FLAG)), *sglang_flags(fixed))
        out.append(Export("fixed", "sglang", args, "every SGLang version"))
        if simulated and threshold:  # 0: off at the lowest load, which "off above N" cannot say
            out.append(
                Export(
                    "dynamic",
                    "sim",
                    (*args, SIM_DISABLE_FLAG, str(threshold)),
                    "specdash sim (the field's dynamic-disable patch)",
                    f"speculation off while more than {threshold} requests run",
                )
            )
        dynamic = sglang_adaptive(policy, settings, base.args)
        if dynamic is not None:
            out.append(dynamic)
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


def sglang_tiers(policy: Policy, settings: Mapping[str, SpecSetting]) -> dict[str, dict[str, list[int]]] | None:
    """The adaptive config's batch-size tiers for `policy`, or None when SGLang's adaptive mode cannot say it.

    One tier per policy range, keyed by its lowest batch size, pinned to the range's steps (0 for "no
    speculation"). None when a range's choice has topk > 1 (adaptive is topk = 1 only) or when the
    policy is a single range (nothing to schedule).
    """
    tiers: dict[str, dict[str, list[int]]] = {}
    for r in policy.ranges:
        if r.choice == BASELINE:
            steps = 0
        else:
            setting = settings[r.choice]
            if setting.topk != 1 or setting.steps is None:
                return None
            steps = setting.steps
        if tiers and list(tiers.values())[-1]["candidate_steps"] == [steps]:
            continue
        tiers[str(r.low)] = {"candidate_steps": [steps]}
    return tiers if len(tiers) > 1 else None


def sglang_tiers_need(tiers: Mapping[str, Mapping[str, Sequence[int]]]) -> tuple[int, ...]:
    """The first SGLang version that accepts `tiers` (step 0 needs SGLANG_STEP0_VERSION)."""
    off = any(0 in t["candidate_steps"] for t in tiers.values())
    return SGLANG_STEP0_VERSION if off else SGLANG_TIERS_VERSION


def _dotted(v: tuple[int, ...]) -> str:
    return ".".join(map(str, v))


def sglang_adaptive(policy: Policy, settings: Mapping[str, SpecSetting], base_args: Sequence[str]) -> Export | None:
    """The policy as SGLang's adaptive mode with pinned batch-size tiers, when it can be said that way."""
    tiers = sglang_tiers(policy, settings)
    if tiers is None:
        return None
    top = max(settings[r.choice].steps or 0 for r in policy.ranges if r.choice != BASELINE)
    # The launch flags size the draft buffers: the deepest tier's chain (topk = 1, draft = steps + 1).
    launch = SpecSetting(top, 1, top + 1)
    args = (*strip_flags(tuple(base_args), (*SGLANG_DRAFT_FLAGS, SIM_DISABLE_FLAG)), *sglang_flags(launch))
    need = sglang_tiers_need(tiers)
    step0 = "step 0 in a tier (sglang#23994)" if need == SGLANG_STEP0_VERSION else "batch-size tiers (sglang#24055)"
    return Export(
        "dynamic",
        "sglang",
        (*args, SGLANG_ADAPTIVE_FLAG, "--speculative-adaptive-config", "adaptive.json"),
        f"SGLang >= {_dotted(need)} (--speculative-adaptive since {_dotted(SGLANG_ADAPTIVE_VERSION)}; {step0}); "
        "EAGLE/EAGLE3, topk = 1",
        "adaptive.json: " + json.dumps(tiers) + " (a tier starts at the CUDA-graph batch size its key pads to)",
    )


def export_need(export: Export) -> tuple[int, ...]:
    """The first engine version that accepts `export` (() = every version)."""
    if export.engine == "vllm" and export.kind == "dynamic":
        return VLLM_SCHEDULE_VERSION
    if export.engine == "sglang" and export.kind == "dynamic":
        text = export.note.removeprefix("adaptive.json: ").split(" (", 1)[0]
        return sglang_tiers_need(json.loads(text))
    return ()


def engine_accepts(export: Export, version: str) -> bool:
    """Whether the installed engine `version` accepts `export` (unknown version: assume it does)."""
    v = _version(version)
    if not v or export.engine == "sim":
        return True
    return v >= export_need(export)


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


def simulated(mode: ModeConfig) -> bool:
    """Whether `mode` runs the simulator (its exports are the simulator's flags)."""
    return len(mode.launcher) >= 2 and mode.launcher[-1] == "sim"


def sweep_policy(reference: Mapping[int, float], measured: Mapping[int, float], label: str) -> Policy:
    """What an A/B's curves say to run at which load, as a tune's `Policy` (`core.tune.build_policy`): the
    reference (plain decoding) is its BASELINE, the speculative mode the one candidate `label`; each level
    one run, so its spread is the noise floor."""
    pts = {
        BASELINE: {c: point([v]) for c, v in reference.items() if v > 0},
        label: {c: point([v]) for c, v in measured.items() if v > 0},
    }
    return build_policy(pts)


def policy_markdown(curves: Mapping[str, Mapping[int, float]], modes: Mapping[str, ModeConfig]) -> str:
    """The verdict of an A/B in the engine's own launch flags, as Markdown for a pull request: which mode to
    run at which load (`sweep_policy`), then each form `exports` gives for the speculative mode (fixed, and
    the dynamic one where the engine has it). "" with fewer than two measured modes or an unknown mode.

    The reference is the first of `curves` (as in `core.verdict`), the speculative mode the second.
    """
    names = [m for m, c in curves.items() if c]
    if len(names) < 2 or names[1] not in modes:
        return ""
    ref, name = names[:2]
    if not any(curves[ref].get(c, 0) > 0 and v > 0 for c, v in curves[name].items()):
        return ""  # no level both measured: nothing to compare
    spec = modes[name]
    setting = setting_of(spec.engine, spec.args, vllm_speculative_config(spec.args))
    policy = sweep_policy(curves[ref], curves[name], name)
    lines = [f"#### The policy: {name} or {ref} by load, in {spec.engine}'s flags", ""]
    for r in policy.ranges:
        top = f"{r.low}..{r.high}" if r.high is not None else f"{r.low} and above"
        who = ref if r.choice == BASELINE else name
        lines.append(f"- C = {top} running requests: **{who}**")
    if policy.fixed is None:
        lines += ["", f"Speculation never pays over the measured levels: run {ref} as it is."]
        return "\n".join(lines) + "\n"
    if setting is None:
        lines += ["", f"{name}'s arguments name no draft setting specdash can read: no flags to export."]
        return "\n".join(lines) + "\n"
    if policy.pays_from is not None:
        lines += [
            "",
            f"Speculation pays only from C = {policy.pays_from} up ({name} loses below it): the fixed form runs "
            "it at every load; a dynamic form, where the engine has one, runs it only where it pays.",
        ]
    for export in exports(spec, policy, {name: setting}, simulated(spec)):
        lines += ["", f"{export.kind} ({export.needs}){': ' + export.note if export.note else ''}:", ""]
        lines += ["```sh", shell_line(export.args), "```"]
    return "\n".join(lines) + "\n"
