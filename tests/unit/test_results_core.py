"""The pure logic of results: SLO arithmetic, the Pareto frontier, speedups and the verdict."""

from __future__ import annotations

import pytest

from specdash.core.pareto import ParetoPoint, frontier, gpu_count, points_for, staircase
from specdash.core.verdict import speedups, verdict
from specdash.slo import Outcome, SloError, evaluate_level, goodput_curve, max_concurrency_meeting, parse_slo

# -- SLO ---------------------------------------------------------------------------------------------------


def test_parse_slo_units_and_labels() -> None:
    slo = parse_slo("ttft_p90=500ms, tpot_p99=0.05s,e2e_p50=2000")
    assert [(t.metric, t.percentile, t.limit_ms) for t in slo.targets] == [
        ("ttft", 90, 500),
        ("tpot", 99, 50),
        ("e2e", 50, 2000),
    ]
    assert slo.text == "ttft_p90≤500ms, tpot_p99≤50ms, e2e_p50≤2000ms"
    assert parse_slo(slo.spec()) == slo


@pytest.mark.parametrize(
    ("text", "part"),
    [
        ("", "empty"),
        ("ttft=500ms", "METRIC_pNN"),
        ("foo_p90=5ms", "unknown metric"),
        ("ttft_p0=5ms", "percentile"),
        ("ttft_p90=-5ms", "positive duration"),
        ("ttft_p90=fast", "positive duration"),
        ("ttft_p90=0ms", "positive"),
        ("ttft_p90=5ms,ttft_p90=6ms", "twice"),
        ("ttft_p90=5ms,,", "empty target"),
    ],
)
def test_parse_slo_rejects(text: str, part: str) -> None:
    with pytest.raises(SloError, match=part):
        parse_slo(text)


def _ok(ttft: float, tpot: float | None, tokens: int = 100) -> Outcome:
    return Outcome(True, ttft, tpot, ttft + (tpot or 0) * tokens, tokens)


def test_level_attainment_counts_errors_as_misses() -> None:
    slo = parse_slo("ttft_p90=500ms,tpot_p90=50ms")
    outcomes = [_ok(100, 20)] * 8 + [_ok(900, 20)] + [Outcome(False)]
    lv = evaluate_level(outcomes, 4, wall_s=10.0, slo=slo)
    assert lv.sent == 10 and lv.good == 8
    assert lv.attainment == pytest.approx(0.8)
    # ttft: 8/10 within 500 ms < 90 %: the level misses the SLO although every successful TPOT is fine.
    shares = {t.target.metric: t.share for t in lv.targets}
    assert shares == {"ttft": pytest.approx(0.8), "tpot": pytest.approx(0.9)}
    assert not lv.meets
    assert lv.request_goodput == pytest.approx(0.8)
    assert lv.token_goodput == pytest.approx(80.0)


def test_level_meets_at_exactly_the_percentile_and_single_token_requests_meet_tpot() -> None:
    slo = parse_slo("ttft_p90=500ms,tpot_p90=50ms")
    outcomes = [_ok(100, None, 1)] * 9 + [_ok(600, 80)]
    lv = evaluate_level(outcomes, 1, wall_s=1.0, slo=slo)
    assert lv.meets and lv.good == 9


def test_max_concurrency_meeting_is_contiguous_from_the_lowest_level() -> None:
    slo = parse_slo("ttft_p50=100ms")
    good = [_ok(50, 10)] * 4
    bad = [_ok(500, 10)] * 4
    levels = [evaluate_level(o, c, 1.0, slo) for c, o in ((1, good), (2, good), (5, bad), (10, good))]
    assert max_concurrency_meeting(levels) == 2
    assert max_concurrency_meeting(levels[2:]) is None
    assert goodput_curve(levels)[5] == 0.0


# -- Pareto ------------------------------------------------------------------------------------------------


def test_frontier_drops_dominated_points_across_modes() -> None:
    pts = [
        ParetoPoint("base", 1, 100, 50),
        ParetoPoint("base", 8, 600, 30),
        ParetoPoint("base", 32, 1000, 10),
        ParetoPoint("spec", 1, 180, 90),
        ParetoPoint("spec", 8, 550, 28),  # dominated by base C=8
        ParetoPoint("spec", 32, 700, 9),  # dominated by base C=32
    ]
    front = frontier(pts)
    assert [(p.mode, p.concurrency) for p in front] == [("base", 32), ("base", 8), ("spec", 1)]
    corners = staircase(front)
    assert corners[0] == (0.0, 1000) and corners[1] == (10, 1000)
    assert corners[-1] == (90, 0.0)
    # A step function: y never rises left to right.
    assert all(b[1] <= a[1] for a, b in zip(corners, corners[1:], strict=False))


def test_frontier_per_gpu_changes_the_winner() -> None:
    a = ParetoPoint("tp1", 1, 100, 50, gpus=1)
    b = ParetoPoint("tp8", 1, 400, 50, gpus=8)
    assert frontier([a, b]) == [b]
    assert frontier([a, b], per_gpu=True) == [a]


def test_points_and_gpu_count() -> None:
    pts = points_for("m", [(2, 300.0, 20.0), (1, 100.0, None), (4, 500.0, 25.0)], gpus=2)
    assert [(p.concurrency, p.per_user_tok_s, p.per_gpu_tok_s) for p in pts] == [(2, 50.0, 150.0), (4, 40.0, 250.0)]
    assert gpu_count({"tp_size": 4, "dp_size": 2}) == 8
    assert gpu_count({"tensor_parallel_size": 2}) == 2
    assert gpu_count(None, ["python", "-m", "sglang.launch_server", "--tp", "8"]) == 8
    assert gpu_count(None, ["vllm", "serve", "m", "--tensor-parallel-size=2", "--data-parallel-size", "2"]) == 4
    assert gpu_count({"tp_size": True}, []) == 1


# -- verdict -----------------------------------------------------------------------------------------------


def test_speedups_and_verdict_crossing() -> None:
    base = {1: 100.0, 2: 190.0, 5: 400.0, 10: 700.0}
    spec = {1: 180.0, 2: 250.0, 5: 380.0, 10: 560.0}
    assert speedups(base, spec) == {1: 1.8, 2: pytest.approx(250 / 190), 5: 0.95, 10: 0.8}
    text = verdict({"baseline": base, "eagle3": spec})
    assert text.startswith("eagle3 beats baseline up to C≈")
    assert "best 1.80x at C=1" in text and "disable speculation above 4 running requests" in text


def test_verdict_single_mode_never_and_slo() -> None:
    assert verdict({}) == ""
    assert verdict({"baseline": {1: 10.0, 4: 30.0}}).startswith("baseline: peak 30 tok/s at C=4")
    never = verdict({"b": {1: 100.0, 2: 200.0}, "s": {1: 90.0, 2: 150.0}})
    assert "s never beats b: 0.90x at C=1, down to 0.75x" in never
    assert verdict({"b": {1: 100.0, 4: 200.0}, "s": {1: 90.0, 4: 180.0}}) == "s never beats b: 0.90x at C=1."


def test_verdict_says_where_a_mode_that_loses_at_low_c_wins() -> None:
    # Measured on the real vLLM CPU engine (2026-12-02, tests/engine/test_dashboard_engine.py): ngram lost at
    # C=1 and won at C=4; "never beats" was false.
    text = verdict({"plain": {1: 51.0, 4: 184.0}, "ngram": {1: 45.0, 4: 244.0}})
    assert text == "ngram loses to plain at C=1 (0.88x) but beats it at C=4 (1.33x)."
    again = verdict({"b": {1: 100.0, 2: 100.0, 4: 100.0, 8: 100.0}, "s": {1: 150.0, 2: 90.0, 4: 80.0, 8: 120.0}})
    assert again.startswith("s beats b up to C≈") and ", and again at C=8 (1.20x) (best 1.50x at C=1)" in again
    slo = verdict(
        {"b": {1: 100.0, 2: 200.0}, "s": {1: 150.0, 2: 220.0}},
        slo_text="ttft_p90≤500ms",
        capacity={"b": 2, "s": None},
        goodput={"b": {1: 100.0, 2: 200.0}, "s": {1: 150.0, 2: 100.0}},
    )
    assert "Under the SLO (ttft_p90≤500ms): b up to C=2, s at no level" in slo
    assert "s beats b in goodput up to C≈" in slo


# -- acceptance --------------------------------------------------------------------------------------------


def test_accept_alarm() -> None:
    from specdash.core.acceptance import accept_alarm, is_speculative

    assert accept_alarm("eagle3", [1.0, 1.02, None]) is not None
    assert accept_alarm("eagle3", [1.0, 2.4]) is None
    assert accept_alarm("baseline", [None]) is None
    assert is_speculative({"speculative_algorithm": "EAGLE3"})
    assert not is_speculative({"speculative_algorithm": None})
    assert is_speculative(None, ["vllm", "serve", "--speculative-config", "{}"])


# -- guards ------------------------------------------------------------------------------------------------


def test_guard_levels_above_the_graph_and_running_caps_name_both_numbers() -> None:
    from specdash.core.guards import sweep_guards

    out = sweep_guards([1, 10, 64, 128], {"cuda_graph_max_bs": 48, "max_running_requests": 100})
    assert len(out) == 2
    assert "levels 64, 128 above the server's --cuda-graph-max-bs 48" in out[0]
    assert "level 128 above the server's --max-running-requests 100" in out[1]
    # vLLM names, from the command line when the server does not report them.
    argv = ["vllm", "serve", "m", "--max-num-seqs=8", "--max-cudagraph-capture-size", "16"]
    out = sweep_guards([4, 8, 16, 32], None, argv)
    assert "levels 32 above" not in out[0] and "level 32 above the server's --max-cudagraph-capture-size 16" in out[0]
    assert "levels 16, 32 above the server's --max-num-seqs 8" in out[1]
    assert sweep_guards([1, 2], {"cuda_graph_max_bs": 48}) == []


def test_guard_random_prompts_only_for_speculative_modes() -> None:
    import random

    from specdash.bench.prompts import load_prompts
    from specdash.core.guards import looks_random, sweep_guards

    rng = random.Random(0)
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 8))) for _ in range(20000)]
    soup = [" ".join(rng.choice(vocab) for _ in range(200)) for _ in range(10)]
    assert looks_random(soup)
    for name in ("chat", "code"):
        assert not looks_random(load_prompts(name).prompts)
    assert not looks_random(soup[:1][0].split()[:50])  # too little text to tell
    assert "random tokens" in sweep_guards([1], None, speculative=True, prompts=soup)[0]
    assert sweep_guards([1], None, speculative=False, prompts=soup) == []


def test_guard_eagle_eagle3_mismatch() -> None:
    from specdash.core.guards import draft_mismatch, sweep_guards

    out = sweep_guards([1], {"speculative_algorithm": "EAGLE"}, draft_architectures=["LlamaForCausalLMEagle3"])
    assert out and "--speculative-algorithm EAGLE3" in out[0]
    argv = ["python", "-m", "sglang.launch_server", "--speculative-algorithm", "EAGLE3"]
    assert "not EAGLE-3" in sweep_guards([1], None, argv, draft_architectures=["LlamaForCausalLMEagle"])[0]
    assert draft_mismatch("EAGLE3", ["LlamaForCausalLMEagle3"]) is None
    assert draft_mismatch("EAGLE", []) is None


# -- greedy check ------------------------------------------------------------------------------------------


def test_greedy_compare_reports_the_first_difference() -> None:
    from specdash.core.greedy import compare_outputs, first_difference

    same = compare_outputs("base", "spec", ["a b c", "x y"], ["a b c", "x y"])
    assert (same.identical, same.total, same.first) == (2, 2, None)
    assert same.text == "greedy check spec vs base: 2/2 outputs identical"
    diff = compare_outputs("base", "spec", ["a b c", "the cat sat", "q"], ["a b c", "the cat sit", "r"])
    assert diff.identical == 1 and diff.first is not None
    assert (diff.first.prompt_index, diff.first.offset) == (1, 9)
    assert "first difference: prompt 1, character 9" in diff.text and "'the cat sit'" in diff.text
    assert first_difference("abc", "abcd") == 3 and first_difference("", "") is None


def test_sim_greedy_text_depends_on_the_prompt_only_and_the_fault_diverges() -> None:
    from specdash.sim.scheduler import SimRequest

    def text(rid: str, seed: str | None, diverge: int | None = None) -> tuple[int, ...]:
        r = SimRequest(rid=rid, prompt_tokens=4, max_new_tokens=20, word_seed=seed, diverge_at=diverge)
        r.advance(7, 0.0)
        r.advance(13, 0.1)  # in two steps, as verify steps deliver them
        return tuple(r.output_ids)

    assert text("r1", "p") == text("r2", "p") != text("r1", "q")
    assert text("r1", None) != text("r2", None)
    bad = text("r1", "p", diverge=9)
    good = text("r1", "p")
    assert bad[:9] == good[:9] and bad[9] != good[9] and bad[10:] == good[10:]
