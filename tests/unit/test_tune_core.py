"""The tune's pure logic: space, order, drop rule, policy, ETA, verification; exports in the engines' words."""

from __future__ import annotations

import json

import pytest

from specdash.config import ModeConfig
from specdash.core import tune as core
from specdash.core.spec_export import exports, validate_vllm_schedule, vllm_schedule
from specdash.engines.spec_settings import SpecSetting, check_sglang
from specdash.errors import UsageError
from specdash.sim.spec_space import DraftShape, aggregate
from specdash.tune.job import verified_export
from specdash.tune.report import policy_line


def test_parse_space_is_the_cartesian_product() -> None:
    axes, points = core.parse_space("steps=1,2 topk=1,4 draft=4,8")
    assert axes == {"steps": (1, 2), "topk": (1, 4), "draft": (4, 8)}
    assert len(points) == 8 and SpecSetting(2, 4, 8) in points


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "empty"),
        ("steps=1,x", "integers"),
        ("steps=0", "positive"),
        ("depth=3", "expected NAME"),
        ("steps=1 steps=2", "twice"),
        ("steps=1 k=2", "mixes"),
    ],
)
def test_parse_space_rejects_bad_input(text: str, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        core.parse_space(text)


def test_runnable_skips_refused_and_adjusted_points_with_reasons() -> None:
    _, points = core.parse_space("steps=1,3 topk=1,4 draft=4,8")
    keep, skipped = core.runnable(points, check_sglang)
    assert SpecSetting(1, 1, 2) in keep and SpecSetting(3, 1, 4) in keep
    assert SpecSetting(1, 4, 8) not in keep
    reasons = {s.setting.label: s.reason for s in skipped}
    assert reasons["s1-k4-d8"].startswith("refused:")
    assert reasons["s3-k1-d8"].startswith("runs as s3-k1-d4")
    assert len(keep) == len(set(keep))


def test_convergence_order_starts_in_the_middle_and_brackets_the_space() -> None:
    _, points = core.parse_space("steps=1,2,3,5 topk=1,4,8")
    order = core.convergence_order(points)
    assert sorted(order) == sorted(points)
    assert order[0] in (SpecSetting(steps=2, topk=4), SpecSetting(steps=3, topk=4), SpecSetting(steps=2, topk=2))
    corners = {SpecSetting(steps=s, topk=k) for s in (1, 5) for k in (1, 8)}
    assert corners <= set(order[:5]), "the corners come right after the middle"


def P(median: float, spread: float = 0.0) -> core.Point:  # noqa: N802 - reads like a constructor
    return core.Point(median, spread, 1)


def test_drop_rule_needs_every_level_beyond_both_spreads() -> None:
    pts = {
        core.BASELINE: {1: P(100, 2), 8: P(400, 8)},
        "a": {1: P(150, 3), 8: P(300, 6)},
        "b": {1: P(120, 2), 8: P(290, 6)},  # worse than a at 1 and than baseline at 8, by more than the spreads
        "c": {1: P(146, 3), 8: P(280, 6)},  # within the spreads of a at 1: kept
    }
    assert core.dominated("b", pts)
    assert not core.dominated("c", pts)
    assert not core.dominated("a", pts)
    assert not core.dominated(core.BASELINE, pts)


def test_point_spread_has_a_floor() -> None:
    assert core.point([100.0]).spread == pytest.approx(2.0)
    assert core.point([100.0, 110.0, 90.0]).spread == pytest.approx(10.0)


def test_policy_ranges_threshold_and_fixed_setting() -> None:
    pts = {
        core.BASELINE: {1: P(70, 1.4), 2: P(130, 2.6), 4: P(225, 4.5), 8: P(357, 7)},
        "deep": {1: P(100, 2), 2: P(146, 3), 4: P(190, 4), 8: P(240, 5)},
        "shallow": {1: P(85, 2), 2: P(140, 3), 4: P(215, 4), 8: P(260, 5)},
    }
    policy = core.build_policy(pts)
    assert policy.per_level[1][0] == "deep" and policy.per_level[4][0] == core.BASELINE
    assert policy.disable_above == 3  # the envelope (146/130 at 2, 215/225 at 4) crosses 1.0 at C≈3.2
    assert [(r.low, r.high, r.choice) for r in policy.ranges] == [(1, 3, "deep"), (4, None, core.BASELINE)]
    assert policy.fixed == "deep"
    assert policy.per_level[1][1] == pytest.approx(100 / 70)
    json.dumps(policy.to_json())


def test_policy_never_pays() -> None:
    pts = {core.BASELINE: {1: P(70), 2: P(130)}, "x": {1: P(60), 2: P(100)}}
    policy = core.build_policy(pts)
    assert policy.disable_above == 0 and policy.fixed is None
    assert [r.choice for r in policy.ranges] == [core.BASELINE]


def test_an_inverted_crossover_keeps_the_setting_that_pays_under_load() -> None:
    """Losing at the lowest level but winning above it (a starved draft at C = 1, say) is not "never pays":
    the fixed setting is the one that pays where it pays, and the policy says from where."""
    pts = {core.BASELINE: {1: P(70), 4: P(200), 16: P(400)}, "x": {1: P(52), 4: P(300), 16: P(520)}}
    policy = core.build_policy(pts)
    assert policy.disable_above == 0
    assert [(r.low, r.high, r.choice) for r in policy.ranges] == [(1, 3, core.BASELINE), (4, None, "x")]
    assert policy.fixed == "x" and policy.pays_from == 4
    assert policy.fixed_speedup[1] == pytest.approx(52 / 70)
    assert policy_line({"policy": policy.to_json()}) == "no speculative setting measured yet: no verdict on speculation"
    out = {"policy": policy.to_json(), "measured": {"x": {"1": {}}}, "baseline_label": core.BASELINE}
    assert policy_line(out) == "speculation pays only from C = 4 up"
    sim = ModeConfig("x", "sglang", "/m", launcher=("python", "-m", "specdash", "sim"))
    forms = exports(sim, policy, {"x": SpecSetting(2, 1, 3)}, simulated=True)
    assert [(e.kind, e.engine) for e in forms] == [("fixed", "sglang"), ("dynamic", "sglang")]  # no "off above 0"
    assert json.loads(forms[1].note.removeprefix("adaptive.json: ").split(" (")[0]) == {
        "1": {"candidate_steps": [0]},
        "4": {"candidate_steps": [2]},
    }
    assert vllm_schedule(policy, {"x": 3}) == [[1, 3, 0], [4, 4096, 3]]
    never = core.build_policy({core.BASELINE: {1: P(70), 2: P(130)}, "x": {1: P(60), 2: P(100)}})
    assert never.pays_from is None
    assert policy_line({"policy": never.to_json(), "measured": {"x": {"1": {}}}}) == "speculation never pays"


def test_policy_on_the_simulator_model_picks_its_optimum() -> None:
    # The ground truth: the model's own optimum per level over the runnable grid.
    _, points = core.parse_space("steps=1,2,3,5 topk=1,4 draft=4,8,16")
    keep, _ = core.runnable(points, check_sglang)
    levels = (1, 2, 4, 8, 16, 32, 64)

    def tok_s(s: SpecSetting | None, c: int) -> float:
        shape = None if s is None else DraftShape(s.steps or 0, s.topk or 0, s.draft or 0)
        return aggregate(None if s is None else "EAGLE3", shape, c)

    pts = {s.label: {c: core.point([tok_s(s, c)]) for c in levels} for s in keep}
    pts[core.BASELINE] = {c: core.point([tok_s(None, c)]) for c in levels}
    policy = core.build_policy(pts)
    for c in levels:
        best = max([None, *keep], key=lambda s: tok_s(s, c))
        assert policy.per_level[c][0] == (core.BASELINE if best is None else best.label)
    # The threshold follows the model, not one calibration: speculation stops paying between the last
    # level where the model's best setting beats the baseline and the next one (the highest level
    # when it pays everywhere; 0 when it never does).
    pays = [c for c in levels if max(tok_s(s, c) for s in keep) > tok_s(None, c)]
    assert pays == [c for c in levels if c <= max(pays, default=0)], "the model pays at low loads only"
    if not pays:
        assert policy.disable_above == 0
    elif pays[-1] == levels[-1]:
        assert policy.disable_above == levels[-1]
    else:
        assert policy.disable_above is not None
        assert pays[-1] <= policy.disable_above < levels[levels.index(pays[-1]) + 1]
        assert policy.crossover is not None and pays[-1] <= policy.crossover < levels[levels.index(pays[-1]) + 1]


def test_eta_uses_history_and_level_durations() -> None:
    eta = core.estimate_eta(3, 12, [10.0, 12.0, 500.0], [2.0, 3.0])
    assert eta.seconds == pytest.approx(3 * 12.0 + 12 * 2.5)
    assert core.estimate_eta(1, 1, [], []).seconds == pytest.approx(660.0)


def test_verify_ramp_and_checks() -> None:
    assert core.verify_ramp((1, 2, 4, 8), 2) == (1, 2, 3, 4, 8)
    fixed = {1: P(100, 2), 4: P(190, 4)}
    base = {1: P(70, 1), 4: P(225, 4)}
    checks = core.verify_levels({1: 99.0, 2: 120.0, 4: 200.0}, (1, 2, 4), fixed, base)
    by_c = {v.concurrency: v for v in checks}
    assert by_c[1].ok is True
    # interpolated in log C, halfway: fixed 145, baseline 147.5; the better one is the reference
    assert by_c[2].reference == pytest.approx(147.5)
    assert by_c[2].ok is False
    assert by_c[4].reference == 225.0 and by_c[4].ok is False


def _policy() -> core.Policy:
    pts = {
        core.BASELINE: {1: P(70), 2: P(130), 4: P(225)},
        "k4": {1: P(100), 2: P(140), 4: P(180)},
        "k2": {1: P(90), 2: P(145), 4: P(200)},
    }
    return core.build_policy(pts)


def test_vllm_schedule_is_inclusive_ranges_from_1_and_passes_vllms_checks() -> None:
    policy = _policy()
    schedule = vllm_schedule(policy, {"k4": 4, "k2": 2})
    assert schedule[0][0] == 1 and schedule[-1][2] == 0
    validate_vllm_schedule(schedule)
    with pytest.raises(ValueError, match="start at 1"):
        validate_vllm_schedule([[2, 4, 3]])
    with pytest.raises(ValueError, match="non-overlapping"):
        validate_vllm_schedule([[1, 4, 3], [4, 8, 1]])


def test_exports_in_each_engines_words() -> None:
    policy = _policy()
    vllm = ModeConfig(
        "ng", "vllm", "/m", args=("--speculative-config", '{"method": "ngram", "num_speculative_tokens": 9}')
    )
    out = exports(vllm, policy, {"k4": SpecSetting(k=4), "k2": SpecSetting(k=2)}, simulated=False)
    fixed = json.loads(out[0].args[-1])
    assert fixed["method"] == "ngram" and fixed["num_speculative_tokens"] == policy_k(policy)
    dyn = json.loads(out[1].args[-1])
    validate_vllm_schedule(dyn["num_speculative_tokens_per_batch_size"])
    assert dyn["num_speculative_tokens"] == max(k for _, _, k in dyn["num_speculative_tokens_per_batch_size"])

    sgl = ModeConfig("e3", "sglang", "/m", args=("--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "9"))
    pts = {core.BASELINE: {1: P(70), 4: P(225)}, "s4-k1-d5": {1: P(100), 4: P(180)}}
    out = exports(sgl, core.build_policy(pts), {"s4-k1-d5": SpecSetting(4, 1, 5)}, simulated=True)
    kinds = [(e.kind, e.engine) for e in out]
    assert kinds == [("fixed", "sglang"), ("dynamic", "sim"), ("dynamic", "sglang")]
    assert out[0].args.count("--speculative-num-steps") == 1 and "4" in out[0].args
    assert out[1].args[-2:] == ("--sim-disable-spec-above", "2")  # crossover at C≈2.6
    assert "--speculative-adaptive" in out[2].args and "SGLang >= 0.5.14" in out[2].needs
    assert json.loads(out[2].note.split(": ", 1)[1].split(" (")[0]) == {
        "1": {"candidate_steps": [4]},
        "3": {"candidate_steps": [0]},
    }, "steps 4 up to the threshold, drafting off above it"


def _sglang_policy(choices: dict[int, str]) -> core.Policy:
    base = {1: 70.0, 2: 130.0, 4: 225.0, 8: 357.0}
    pts: dict[str, dict[int, core.Point]] = {core.BASELINE: {c: P(v) for c, v in base.items()}}
    for name in set(choices.values()):  # every setting at every level; the chosen one 1.3x, others 1.1x or 0.9x
        pts[name] = {
            c: P(v * (1.3 if choices.get(c) == name else 1.1 if c in choices else 0.9)) for c, v in base.items()
        }
    return core.build_policy(pts)


SGL = ModeConfig("e3", "sglang", "/m", args=("--speculative-algorithm", "EAGLE3"))
SETTINGS = {"s5-k1-d6": SpecSetting(5, 1, 6), "s2-k1-d3": SpecSetting(2, 1, 3), "s3-k4-d8": SpecSetting(3, 4, 8)}


@pytest.mark.parametrize(
    ("version", "kinds"),
    [
        ("0.5.6", ["fixed"]),  # no adaptive mode at all
        ("0.5.11", ["fixed"]),  # adaptive, but one global step list: no batch-size tiers
        ("0.5.13", ["fixed", "dynamic"]),  # tiers, every one speculating
        ("0.5.19", ["fixed", "dynamic"]),
        (None, ["fixed", "dynamic"]),  # unknown: every form, each naming the version it needs
    ],
)
def test_sglang_step_tiers_need_0_5_13(version: str | None, kinds: list[str]) -> None:
    policy = _sglang_policy({1: "s5-k1-d6", 2: "s5-k1-d6", 4: "s2-k1-d3", 8: "s2-k1-d3"})
    out = exports(SGL, policy, SETTINGS, simulated=False, version=version)
    assert [e.kind for e in out] == kinds
    if "dynamic" in kinds:
        dyn = out[1]
        assert "SGLang >= 0.5.13" in dyn.needs
        assert dyn.args.count("--speculative-num-steps") == 1
        assert dyn.args[dyn.args.index("--speculative-num-steps") + 1] == "5", "buffers for the deepest tier"
        assert '{"1": {"candidate_steps": [5]}, "4": {"candidate_steps": [2]}}' in dyn.note


@pytest.mark.parametrize(("version", "dynamic"), [("0.5.13", False), ("0.5.14", True), ("v0.5.19.post1", True)])
def test_sglang_drafting_off_above_a_batch_needs_step_0(version: str, dynamic: bool) -> None:
    policy = _sglang_policy({1: "s5-k1-d6", 2: "s5-k1-d6"})
    out = exports(SGL, policy, SETTINGS, simulated=False, version=version)
    assert ("dynamic" in [e.kind for e in out]) is dynamic
    assert out[0].kind == "fixed" and "--speculative-adaptive" not in out[0].args


def test_sglang_adaptive_is_not_exported_for_a_topk_above_1() -> None:
    policy = _sglang_policy({1: "s3-k4-d8", 2: "s3-k4-d8"})
    out = exports(SGL, policy, SETTINGS, simulated=False)
    assert [e.kind for e in out] == ["fixed"], "SGLang's adaptive mode runs only with topk = 1"
    assert not any(arg.startswith("--speculative-disable") for e in out for arg in e.args)


def policy_k(policy: core.Policy) -> int:
    return {"k4": 4, "k2": 2}[policy.fixed or ""]


def test_candidate_modes_replace_the_draft_settings_in_the_engines_words() -> None:
    from specdash.tune.plan import candidate_mode

    sgl = ModeConfig(
        "e3", "sglang", "/m", args=("--tp", "8", "--speculative-num-steps", "2", "--speculative-eagle-topk=4")
    )
    mode = candidate_mode(sgl, SpecSetting(3, 1, 4))
    assert mode.name == "e3@s3-k1-d4"
    assert mode.args == ("--tp", "8", *("--speculative-num-steps", "3", "--speculative-eagle-topk", "1"),
                         "--speculative-num-draft-tokens", "4")  # fmt: skip
    spec = '{"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_min": 3, "prompt_lookup_max": 5}'
    vllm = ModeConfig("ng", "vllm", "/m", args=("--speculative-config", spec, "--max-num-seqs", "16"))
    mode = candidate_mode(vllm, SpecSetting(k=2, lookup_max=2))
    assert mode.args[:2] == ("--max-num-seqs", "16") and mode.args[2] == "--speculative-config"
    assert json.loads(mode.args[3]) == {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 2,
                                        "prompt_lookup_max": 2}  # fmt: skip


def test_pooled_noise_needs_degrees_of_freedom_and_pools_relative_deviations() -> None:
    assert core.pooled_rel_sd([[100.0], [50.0]]) is None, "single blocks show no noise"
    assert core.pooled_rel_sd([[100.0, 110.0]]) is None, "one degree of freedom is below the minimum"
    sd = core.pooled_rel_sd([[90.0, 110.0], [45.0, 55.0]])
    assert sd == pytest.approx((4 * 0.1**2 / 2) ** 0.5), "both groups deviate 10 % twice: 4 squares over 2 dof"


def test_a_single_block_gets_the_noise_its_rivals_showed() -> None:
    measured = {
        core.BASELINE: {2: [130.0]},
        "a": {2: [140.0, 126.0, 154.0, 133.0, 147.0]},  # noisy: about 8 % per block
        "b": {2: [133.0]},
    }
    pts = core.points(measured)
    assert pts["b"][2].se > 0.05 * 133, "b's one block inherits a's noise, not the 2 % floor"
    assert pts[core.BASELINE][2].se == pytest.approx(0.02 * 130), "the baseline is never pooled with the settings"
    assert core.contenders(pts, 2, ["a", "b"]) == ("a", "b"), "b is within 2 standard errors of a"


def test_more_blocks_shrink_the_standard_error_down_to_the_floor_share() -> None:
    few = core.point([100.0, 104.0, 96.0])
    many = core.point([100.0, 104.0, 96.0] * 12)
    assert many.se < few.se / 3, "12 x the blocks: about sqrt(12) = 3.5 x smaller"
    assert core.point([100.0] * 25).se == pytest.approx(0.02 * 100 / 5), "identical blocks: the floor / sqrt(n)"


def test_separation_and_ties_in_the_policy() -> None:
    def pt(median: float, se: float) -> core.Point:
        return core.Point(median, 0.0, 10, se)

    pts = {
        core.BASELINE: {1: pt(70, 0.5), 2: pt(130, 0.5)},
        "deep": {1: pt(100, 0.8), 2: pt(145, 1.0)},
        "mid": {1: pt(92, 0.8), 2: pt(143, 1.0)},  # 2 below deep at C=2: within 2 x hypot(1, 1) = 2.83
        "dropped": {1: pt(60, 5), 2: pt(140, 5)},
    }
    assert core.separated(pts["deep"][1], pts["mid"][1])
    assert not core.separated(pts["deep"][2], pts["mid"][2])
    policy = core.build_policy(pts, dropped=["dropped"])
    assert policy.per_level[2][0] == "deep", "the highest median is chosen"
    assert policy.ties == {2: ("deep", "mid")}, "and the unseparated rival is reported, the dropped one is not"
    assert policy.to_json()["ties"] == {"2": ["deep", "mid"]}


def test_every_restart_gets_its_own_seed_in_the_engines_words() -> None:
    from specdash.tune.plan import restart_seed, seeded_args

    seeds = {restart_seed(c, r) for c in ("baseline", "s3-k4-d8") for r in range(3)}
    assert len(seeds) == 6, "distinct per (candidate, pass)"
    assert restart_seed("s3-k4-d8", 1) == restart_seed("s3-k4-d8", 1), "stable: a resumed restart repeats it"
    assert seeded_args("sglang", ("--tp", "8", "--random-seed", "1"), 7) == ("--tp", "8", "--random-seed", "7")
    assert seeded_args("vllm", ("--max-num-seqs", "4"), 7) == ("--max-num-seqs", "4", "--seed", "7")
    assert seeded_args("other", ("--x",), 7) == ("--x",)


def test_the_simulator_takes_sglangs_random_seed() -> None:
    import argparse

    from specdash.sim.args import add_arguments, resolve

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    seeded, _ = resolve(parser.parse_args(["--model-path", "/m", "--random-seed", "42"]))
    default, _ = resolve(parser.parse_args(["--model-path", "/m", "--sim-seed", "3"]))
    assert seeded.seed == 42 and default.seed == 3


def test_the_journal_state_keeps_every_block_once() -> None:
    from specdash.tune.journal import TuneState

    state = TuneState()
    records = [
        {"type": "level", "candidate": "a", "repeat": 0, "c": 2, "tok_s": 140.0},  # a version-1 record: block 0
        {"type": "level", "candidate": "a", "repeat": 1, "c": 2, "block": 0, "tok_s": 138.0},
        {"type": "level", "candidate": "a", "repeat": 1, "c": 2, "block": 1, "tok_s": 142.0},
        {"type": "level", "candidate": "a", "repeat": 1, "c": 2, "block": 1, "tok_s": 142.0},  # replayed twice
        {"type": "done", "candidate": "a", "repeat": 1},
    ]
    for record in records:
        state.apply(record)
    assert state.blocks("a", 1, 2) == 2 and state.blocks("a", 0, 2) == 1
    assert sorted(state.measured()["a"][2]) == [138.0, 140.0, 142.0]
    assert ("a", 1) in state.done and ("a", 0) not in state.done


def test_the_tune_verifies_a_form_the_modes_own_launcher_runs() -> None:
    """On the simulator an inverted crossover has no "off above N" form: the tune verifies the fixed flags, not
    SGLang's adaptive config (which the simulator does not take); on SGLang itself, the adaptive one."""
    pts = {core.BASELINE: {1: P(70), 4: P(200)}, "x": {1: P(52), 4: P(300)}}
    policy = core.build_policy(pts)
    settings = {"x": SpecSetting(2, 1, 3)}
    sim = ModeConfig("x", "sglang", "/m", launcher=("python", "-m", "specdash", "sim"))
    chosen = verified_export(sim, exports(sim, policy, settings, simulated=True))
    assert (chosen.kind, chosen.engine) == ("fixed", "sglang")
    real = ModeConfig("x", "sglang", "/m")
    chosen = verified_export(real, exports(real, policy, settings, simulated=False))
    assert (chosen.kind, chosen.engine) == ("dynamic", "sglang")
    crossing = _policy()
    both = {"k4": SpecSetting(4, 1, 5), "k2": SpecSetting(2, 1, 3)}
    assert verified_export(sim, exports(sim, crossing, both, simulated=True)).engine == "sim"
