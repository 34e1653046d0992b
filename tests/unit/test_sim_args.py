"""`specdash sim` flags resolve like SGLang's ServerArgs, including the warnings it logs."""

from __future__ import annotations

import argparse

import pytest

from specdash.cli import build_parser
from specdash.errors import UsageError
from specdash.sim.args import SimConfig, SpecParamsError, resolve
from specdash.sim.faults import Faults, parse_faults


def parse(*argv: str, env: dict[str, str] | None = None) -> tuple[SimConfig, list[str]]:
    ns = build_parser().parse_args(["sim", "--model-path", "/models/kimi", *argv])
    return resolve(ns, env or {})


def test_defaults_are_sglangs() -> None:
    c, warnings = parse()
    assert (c.host, c.port, c.tp_size, c.max_running_requests) == ("127.0.0.1", 30000, 1, None)
    assert c.speculative_algorithm is None and warnings == []
    assert c.log_style == "sglang-0.5" and c.time_scale == 1.0


def test_spec_sets_48_and_auto_params_with_sglangs_warning() -> None:
    c, warnings = parse("--tp", "8", "--speculative-algorithm", "eagle3")
    assert c.tp_size == 8 and c.speculative_algorithm == "EAGLE3"
    assert (c.speculative_num_steps, c.speculative_eagle_topk, c.speculative_num_draft_tokens) == (3, 1, 4)
    assert c.max_running_requests == 48 and c.cuda_graph_max_bs == 48
    assert (
        "Max running requests is reset to 48 for speculative decoding. "
        "You can override this by explicitly setting --max-running-requests."
    ) in warnings
    assert "Overlap scheduler is disabled because of using eagle3 or standalone speculative decoding." in warnings


def test_explicit_max_running_is_kept() -> None:
    c, warnings = parse("--speculative-algorithm", "EAGLE3", "--max-running-requests", "64")
    assert c.max_running_requests == 64
    assert not any("reset to 48" in w for w in warnings)


def test_nextn_becomes_eagle_and_topk1_adjusts_draft_tokens() -> None:
    c, warnings = parse(
        "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "2",
        "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "8",
    )  # fmt: skip
    assert c.speculative_algorithm == "EAGLE" and c.speculative_num_draft_tokens == 3
    assert (
        "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"
        in warnings
    )


def test_partial_draft_params_fail_like_sglangs_assert() -> None:
    with pytest.raises(SpecParamsError):
        parse("--speculative-algorithm", "EAGLE3", "--speculative-eagle-topk", "1")


def test_spec_v2_env_var_by_style() -> None:
    _, w05 = parse("--speculative-algorithm", "EAGLE3", env={"SGLANG_ENABLE_SPEC_V2": "1"})
    assert "Beta spec is enabled for eagle speculative decoding and overlap schedule is turned on." in w05
    _, w26 = parse("--speculative-algorithm", "EAGLE3", "--sim-log-style", "sglang-2026",
                   env={"SGLANG_ENABLE_SPEC_V2": "1"})  # fmt: skip
    assert any(w.startswith("SGLANG_ENABLE_SPEC_V2 has been removed") for w in w26)


def test_unknown_sglang_flags_are_kept_not_fatal() -> None:
    # (--enable-torch-compile was the flag without a value here until the simulator learnt it)
    c, _ = parse("--mem-fraction-static", "0.8", "--trust-remote-code")
    assert c.unknown_flags == ("--mem-fraction-static", "0.8", "--trust-remote-code")


def test_unknown_sim_flag_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--sim-typo"):
        parse("--sim-typo")


def test_config_round_trips_through_json() -> None:
    c, _ = parse(
        "--speculative-algorithm", "EAGLE3", "--sim-fault", "crash-at-batch=8", "--sim-fault", "oom-at-capture"
    )
    assert SimConfig.from_json(c.to_json()) == c


def test_fault_parsing() -> None:
    f = parse_faults(["crash-at-batch=16", "hang-at=draft-graph", "slow-health", "warmup-fail", "port-in-use"])
    assert f == Faults(crash_at_batch=16, hang_at="draft-graph", slow_health=25.0, warmup_fail=True, port_in_use=True)
    assert parse_faults(["slow-node=1x100"]) == Faults(slow_node=1, slow_factor=100.0)
    assert parse_faults(["slow-node=2"]) == Faults(slow_node=2, slow_factor=10.0)
    assert parse_faults(["slow-warmup"]) == Faults(slow_warmup=60.0)
    assert parse_faults(["slow-warmup=2.5"]) == Faults(slow_warmup=2.5)
    for bad in (
        "crash-at-batch=x",
        "hang-at=nowhere",
        "explode",
        "oom-at-capture=1",
        "slow-node=-1",
        "slow-node=1x0.5",
        "slow-warmup=-1",
        "slow-warmup=nan",
        "slow-warmup=inf",
    ):
        with pytest.raises(UsageError):
            parse_faults([bad])


def test_disable_spec_above_needs_spec() -> None:
    with pytest.raises(UsageError):
        parse("--sim-disable-spec-above", "8")


def test_sim_subcommand_is_registered() -> None:
    parser = build_parser()
    ns = parser.parse_args(["sim", "--model-path", "m", "--tp-size", "2"])
    assert isinstance(ns, argparse.Namespace) and ns.tp_size == 2
