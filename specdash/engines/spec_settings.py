"""Speculative settings in each engine's own words: which ones it accepts, and the flags that launch them.

A `SpecSetting` is one point of a tuning space. What the engines do with one (read from their sources):

SGLang (`python/sglang/srt/server_args.py`, `_handle_speculative_decoding`, v0.5.6 and HEAD):

* The three draft parameters go together: setting some but not all fails a bare `assert`.
* `topk == 1` forces `num_draft_tokens = num_steps + 1` (a warning, not an error): `(3, 1, 8)` runs as
  `(3, 1, 4)`. A tune treats the adjusted setting as a duplicate of the one SGLang actually runs.
* The verified tree is the best `draft - 1` of the `topk + (steps - 1) * topk**2` drafted candidates
  (`organize_draft_results`, `speculative/eagle_utils.py`: `torch.topk(score_list, num_draft_token - 1)`).
  Asking for more fails inside torch (`RuntimeError: selected index k out of range`) at the first
  draft forward, during CUDA graph capture or warmup: the engine refuses it. SGLang's own grid script
  (`scripts/playground/bench_speculative.py`) skips the stricter `steps * topk + 1 < draft`.
* `steps`, `topk` and `draft` must be at least 1 (`draft` 1 has nothing to verify: refused here).

vLLM (`vllm/config/speculative.py`): `--speculative-config` JSON with `method` and
`num_speculative_tokens` >= 1; n-gram adds `prompt_lookup_max` >= `prompt_lookup_min` >= 1.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class SpecSetting:
    """One speculative configuration; the fields that do not apply to an engine stay None."""

    steps: int | None = None
    """SGLang `--speculative-num-steps`."""
    topk: int | None = None
    """SGLang `--speculative-eagle-topk`."""
    draft: int | None = None
    """SGLang `--speculative-num-draft-tokens`."""
    k: int | None = None
    """vLLM `num_speculative_tokens`."""
    lookup_max: int | None = None
    """vLLM n-gram `prompt_lookup_max`."""

    @property
    def label(self) -> str:
        """A short name: `s3-k4-d8` (SGLang) or `k4-l2` (vLLM)."""
        parts = []
        for prefix, value in (("s", self.steps), ("k", self.topk), ("d", self.draft)):
            if value is not None:
                parts.append(f"{prefix}{value}")
        if self.k is not None:
            parts.append(f"k{self.k}")
        if self.lookup_max is not None:
            parts.append(f"l{self.lookup_max}")
        return "-".join(parts) or "default"

    def to_json(self) -> dict[str, int]:
        """The fields that are set."""
        return {
            name: value
            for name, value in (
                ("steps", self.steps),
                ("topk", self.topk),
                ("draft", self.draft),
                ("k", self.k),
                ("lookup_max", self.lookup_max),
            )
            if value is not None
        }


SGLANG_KEYS = ("steps", "topk", "draft")
VLLM_KEYS = ("k", "lookup_max")


@dataclass(frozen=True)
class Verdict:
    """What the engine does with a setting."""

    runs_as: SpecSetting | None
    """The setting the engine actually runs (after its own adjustments), or None when it refuses."""
    reason: str = ""
    """Why it refuses, or what it adjusted (empty when it runs the setting as given)."""


def sglang_candidates(steps: int, topk: int) -> int:
    """How many drafted tokens the verify step chooses from: `topk + (steps - 1) * topk**2`."""
    return topk + (steps - 1) * topk * topk


def check_sglang(setting: SpecSetting) -> Verdict:
    """What SGLang (v0.5.6 and HEAD) does with `setting` (see the module docstring)."""
    steps, topk, draft = setting.steps, setting.topk, setting.draft
    if steps is None or topk is None or draft is None:
        return Verdict(None, "SGLang needs all three of steps, topk and draft (a partial set fails an assert)")
    if steps < 1 or topk < 1 or draft < 1:
        return Verdict(None, "steps, topk and draft must be at least 1")
    if topk == 1:
        if draft != steps + 1:
            return Verdict(
                SpecSetting(steps, 1, steps + 1),
                f"SGLang sets draft = steps + 1 = {steps + 1} when topk == 1 (server_args.py)",
            )
        return Verdict(setting)
    if draft < 2:
        return Verdict(None, "draft must be at least 2 with topk > 1 (nothing to verify)")
    pool = sglang_candidates(steps, topk)
    if draft - 1 > pool:
        return Verdict(
            None,
            f"draft - 1 = {draft - 1} > the {pool} drafted candidates of steps={steps}, topk={topk} "
            "(torch.topk in organize_draft_results: 'selected index k out of range')",
        )
    return Verdict(setting)


def check_vllm(setting: SpecSetting, method: str) -> Verdict:
    """What vLLM does with `setting` for `method` (ngram, eagle, eagle3, ...)."""
    if setting.k is None or setting.k < 1:
        return Verdict(None, "vLLM needs num_speculative_tokens (k) >= 1")
    if setting.lookup_max is not None:
        if method != "ngram":
            return Verdict(None, f"prompt_lookup_max applies to the ngram method, not {method}")
        if setting.lookup_max < 1:
            return Verdict(None, "prompt_lookup_max must be at least 1")
    return Verdict(setting)


def sglang_flags(setting: SpecSetting) -> tuple[str, ...]:
    """`--speculative-num-steps N --speculative-eagle-topk K --speculative-num-draft-tokens D`."""
    return (
        "--speculative-num-steps",
        str(setting.steps),
        "--speculative-eagle-topk",
        str(setting.topk),
        "--speculative-num-draft-tokens",
        str(setting.draft),
    )


SGLANG_DRAFT_FLAGS = ("--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens")
"""The flags `sglang_flags` writes (a base mode's own values for them are replaced)."""


def strip_flags(args: tuple[str, ...], flags: tuple[str, ...]) -> tuple[str, ...]:
    """`args` without `flags` and their values (`--flag value` and `--flag=value` forms)."""
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in flags:
            skip = "=" not in arg
            continue
        out.append(arg)
    return tuple(out)


def setting_of(engine: str, args: tuple[str, ...], vllm_spec: dict[str, object] | None = None) -> SpecSetting | None:
    """The speculative setting a mode's arguments launch (None: they launch no speculation).

    SGLang: the three draft flags (`--flag value` or `--flag=value`); vLLM: `num_speculative_tokens` and
    `prompt_lookup_max` of its `--speculative-config` JSON, parsed by the caller (`vllm_spec`).
    """
    if engine == "vllm":
        spec = vllm_spec or {}
        k, lookup = spec.get("num_speculative_tokens"), spec.get("prompt_lookup_max")
        if not isinstance(k, int):
            return None
        return SpecSetting(k=k, lookup_max=lookup if isinstance(lookup, int) else None)
    values: dict[str, int] = {}
    for i, arg in enumerate(args):
        name, _, value = arg.partition("=")
        if name in SGLANG_DRAFT_FLAGS:
            text = value if "=" in arg else (args[i + 1] if i + 1 < len(args) else "")
            if text.isdigit():
                values[name] = int(text)
    steps, topk, draft = (values.get(flag) for flag in SGLANG_DRAFT_FLAGS)
    if steps is None or topk is None or draft is None:
        return None
    return SpecSetting(steps, topk, draft)
