"""The simulator's model of the draft-parameter space, and SGLang's rules for which settings run."""

from __future__ import annotations

import argparse

import pytest

from specdash.engines.spec_settings import SpecSetting, check_sglang, check_vllm, strip_flags
from specdash.sim.args import SpecRefusedError, add_arguments, resolve
from specdash.sim.model import EAGLE3, eagle3_model
from specdash.sim.spec_space import CALIBRATION, DraftShape, aggregate, best_chain_steps, mean_accept, step_cost


def test_the_calibration_setting_keeps_the_field_figures() -> None:
    cost = step_cost("EAGLE3", DraftShape(*CALIBRATION))
    assert cost.a_ms == pytest.approx(EAGLE3.a_ms)
    assert cost.b_ms == pytest.approx(EAGLE3.b_ms)
    assert cost.mean_accept == pytest.approx(EAGLE3.mean_accept)
    assert aggregate("EAGLE3", DraftShape(*CALIBRATION), 1) == pytest.approx(eagle3_model().expected_aggregate(1))


def test_best_depth_falls_with_the_batch_as_in_the_field() -> None:
    # sglang#22246: 4 steps best at batch 1, 2 steps at batch 64.
    assert best_chain_steps(1) == 4
    assert best_chain_steps(64) == 2
    depths = [best_chain_steps(bs) for bs in (1, 2, 4, 8, 16, 32, 64)]
    assert depths == sorted(depths, reverse=True)


def test_deeper_and_wider_trees_accept_more_and_cost_more_per_request() -> None:
    narrow, wide, deep = DraftShape(2, 1, 3), DraftShape(2, 4, 8), DraftShape(5, 1, 6)
    assert mean_accept("EAGLE3", wide) > mean_accept("EAGLE3", narrow)
    assert mean_accept("EAGLE3", deep) > mean_accept("EAGLE3", narrow)
    assert step_cost("EAGLE3", wide).b_ms > step_cost("EAGLE3", narrow).b_ms
    assert mean_accept("EAGLE", narrow) < mean_accept("EAGLE3", narrow)


def test_speculation_stops_paying_as_the_batch_grows() -> None:
    shape = DraftShape(2, 4, 16)
    assert aggregate("EAGLE3", shape, 1) > aggregate(None, None, 1)
    assert aggregate("EAGLE3", shape, 16) < aggregate(None, None, 16)


@pytest.mark.parametrize(
    ("setting", "runs_as"),
    [
        (SpecSetting(3, 1, 4), SpecSetting(3, 1, 4)),
        (SpecSetting(3, 1, 8), SpecSetting(3, 1, 4)),  # adjusted: draft = steps + 1
        (SpecSetting(1, 4, 8), None),  # 7 > 4 candidates
        (SpecSetting(1, 4, 5), SpecSetting(1, 4, 5)),
        (SpecSetting(2, 4, 16), SpecSetting(2, 4, 16)),  # 15 <= 4 + 16
        (SpecSetting(3, 0, 4), None),
        (SpecSetting(3, None, 4), None),
    ],
)
def test_sglang_rules(setting: SpecSetting, runs_as: SpecSetting | None) -> None:
    verdict = check_sglang(setting)
    assert verdict.runs_as == runs_as
    assert bool(verdict.reason) == (runs_as != setting)


def test_vllm_rules() -> None:
    assert check_vllm(SpecSetting(k=4, lookup_max=2), "ngram").runs_as is not None
    assert check_vllm(SpecSetting(k=4, lookup_max=2), "eagle3").runs_as is None
    assert check_vllm(SpecSetting(k=0), "ngram").runs_as is None


def test_strip_flags_removes_both_forms() -> None:
    args = ("--tp", "8", "--speculative-num-steps", "3", "--speculative-eagle-topk=4", "--x")
    assert strip_flags(args, ("--speculative-num-steps", "--speculative-eagle-topk")) == ("--tp", "8", "--x")


def _ns(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(["--model-path", "/m", *argv])


def test_the_simulator_refuses_what_sglang_refuses() -> None:
    spec = ("--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "1")
    with pytest.raises(SpecRefusedError, match="candidates"):
        resolve(_ns(*spec, "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "8"), env={})
    config, warnings = resolve(
        _ns(*spec, "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "8"), env={}
    )
    assert config.speculative_num_draft_tokens == 2
    assert any("adjusted to speculative_num_steps + 1" in w for w in warnings)


def test_sim_command_prints_the_torch_error_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    from specdash.cli import main

    argv = ["sim", "--model-path", "/m", "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "1",
            "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "8"]  # fmt: skip
    assert main(argv) == 1
    assert capsys.readouterr().err.rstrip().endswith("RuntimeError: selected index k out of range")
