"""The verdict of an A/B in the engine's own flags (`core.spec_export.policy_markdown`), and reading a mode's
draft setting from its arguments (`engines.spec_settings.setting_of`)."""

from __future__ import annotations

import json

import pytest

from specdash.config import ModeConfig
from specdash.core.spec_export import policy_markdown
from specdash.engines.spec_settings import SpecSetting, setting_of

BASE = {1: 150.0, 4: 560.0, 16: 1900.0, 32: 3000.0}
SPEC = {1: 370.0, 4: 1100.0, 16: 2100.0, 32: 2600.0}
SGL = ModeConfig(
    "eagle3",
    "sglang",
    "m",
    args=("--speculative-num-steps=3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"),
)
VLLM_SPEC = {"method": "eagle3", "model": "d", "num_speculative_tokens": 3}
VLLM = ModeConfig("eagle3", "vllm", "m", args=("--speculative-config", json.dumps(VLLM_SPEC)))


@pytest.mark.parametrize(
    ("engine", "args", "spec", "setting"),
    [
        ("sglang", SGL.args, None, SpecSetting(3, 1, 4)),
        ("sglang", ("--speculative-num-steps", "3"), None, None),  # all three or none
        ("sglang", (), None, None),
        ("vllm", (), VLLM_SPEC, SpecSetting(k=3)),
        (
            "vllm",
            (),
            {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 2},
            SpecSetting(k=4, lookup_max=2),
        ),
        ("vllm", (), {}, None),
    ],
)
def test_setting_of_reads_the_draft_flags(
    engine: str, args: tuple[str, ...], spec: dict[str, object] | None, setting: SpecSetting | None
) -> None:
    assert setting_of(engine, args, spec) == setting


def test_an_ab_becomes_the_ranges_and_the_engines_flags() -> None:
    text = policy_markdown({"baseline": BASE, "eagle3": SPEC}, {"eagle3": VLLM})
    assert text.startswith("#### The policy: eagle3 or baseline by load, in vllm's flags\n")
    ranges = [line for line in text.splitlines() if line.startswith("- C = ")]
    assert ranges == ["- C = 1..21 running requests: **eagle3**", "- C = 22 and above running requests: **baseline**"]
    schedule = '"num_speculative_tokens_per_batch_size": [[1, 21, 3], [22, 4096, 0]]'
    assert schedule in text and "fixed (every vLLM V1)" in text


def test_no_policy_without_two_modes_or_when_speculation_never_pays() -> None:
    assert policy_markdown({"baseline": BASE}, {"eagle3": SGL}) == ""
    assert policy_markdown({"baseline": BASE, "other": SPEC}, {"eagle3": SGL}) == ""  # a mode not configured
    assert policy_markdown({"baseline": {1: 0.0}, "eagle3": {1: 300.0}}, {"eagle3": SGL}) == ""  # no common level
    slower = {c: v * 0.5 for c, v in BASE.items()}
    text = policy_markdown({"baseline": BASE, "eagle3": slower}, {"eagle3": SGL})
    assert "Speculation never pays over the measured levels: run baseline as it is." in text
    assert "```sh" not in text


def test_an_inverted_crossover_exports_the_setting_that_pays_under_load() -> None:
    """Speculation losing at C = 1 and winning from C = 4 up (ci27's starved simulator): the flags are given,
    with the range it pays in, never "never pays" under a range that says it does."""
    spec = {1: 110.0, 4: 850.0, 16: 2300.0, 32: 3300.0}
    text = policy_markdown({"baseline": BASE, "eagle3": spec}, {"eagle3": SGL})
    ranges = [line for line in text.splitlines() if line.startswith("- C = ")]
    assert ranges == ["- C = 1..3 running requests: **baseline**", "- C = 4 and above running requests: **eagle3**"]
    assert "never pays" not in text
    assert "Speculation pays only from C = 4 up (eagle3 loses below it)" in text
    assert "fixed (every SGLang version)" in text and "--speculative-num-steps 3" in text
    assert '{"1": {"candidate_steps": [0]}, "4": {"candidate_steps": [3]}}' in text
