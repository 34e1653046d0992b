"""Level summaries, the server's view, warnings, level splitting across processes, CLI validation."""

from __future__ import annotations

from typing import Any

import pytest

from specdash.bench.gauges import POLL_NAMES, read_gauges
from specdash.bench.samples import Failure, RequestSample
from specdash.bench.server_view import ServerView, level_view, parse_prometheus, running_cap, warnings_for
from specdash.bench.summary import in_flight_at_loss, summarize
from specdash.bench.sweep import SweepConfig, validate_levels, validate_url
from specdash.bench.text_tables import compare_table, level_table
from specdash.bench.workers import processes_for, split_level
from specdash.errors import UsageError
from tests.support.cli import cli

MS = 1_000_000


def sample(
    i: int, start_ms: int, end_ms: int, tokens: int = 10, error: Failure | None = None, **kw: Any
) -> RequestSample:
    chunks = (
        ()
        if error
        else tuple(
            range(
                (end_ms - start_ms) * 1000 // tokens,
                (end_ms - start_ms) * 1000 + 1,
                (end_ms - start_ms) * 1000 // tokens,
            )
        )[:tokens]
    )
    return RequestSample(
        index=i, prompt_index=i, worker=0, error=error, detail="", http_status=200, scheduled_ns=start_ms * MS,
        start_ns=start_ms * MS, end_ns=end_ms * MS,
        first_token_ns=None if error else start_ms * MS + chunks[0] * 1000,
        last_token_ns=None if error else start_ms * MS + chunks[-1] * 1000,
        output_tokens=0 if error else tokens, requested_tokens=tokens, estimated=False, per_chunk_exact=True,
        chunk_offsets_us=chunks, chunk_tokens=(1,) * len(chunks), **kw,
    )  # fmt: skip


def test_summary_counts_failures_and_excludes_them_from_rates() -> None:
    samples = [sample(0, 0, 100), sample(1, 0, 100), sample(2, 100, 200), sample(3, 100, 150, error=Failure.RESET)]
    st = summarize(samples, concurrency=2)
    assert (st.sent, st.completed, st.failed) == (4, 3, 1)
    assert st.failures == {"reset": 1}
    assert st.total_output_tokens == 30
    assert st.wall_s == pytest.approx(0.2)
    assert st.output_tok_s_wall == pytest.approx(150.0)
    assert st.ttft_ms.count == 3
    assert st.achieved_concurrency == pytest.approx((100 + 100 + 100 + 50) / 200)
    assert st.tokens_per_chunk == pytest.approx(1.0)


def test_the_load_at_a_lost_connection_counts_the_requests_running_at_the_first_loss() -> None:
    """The server dies at 500 ms: two probe processes' requests running then all fail (their ends spread a
    little); those done before, and the refused retries after, are not the load it died at."""
    done = [sample(0, 0, 300), sample(1, 100, 400)]
    running = [sample(2 + i, 200 + 10 * i, 500 + i, error=Failure.RESET) for i in range(12)]
    retried = [sample(20 + i, 520 + i, 521 + i, error=Failure.REFUSED) for i in range(5)]
    assert in_flight_at_loss(done) is None
    assert in_flight_at_loss(done + [sample(9, 0, 50, error=Failure.HTTP_STATUS)]) is None  # one rejected request
    assert in_flight_at_loss(retried + running + done) == 12
    # A request still streaming at the loss counts too, whatever its end.
    assert in_flight_at_loss([*running, sample(40, 450, 900)]) == 13


def test_summary_steady_state_excludes_ramp_and_drain() -> None:
    # C=2: staggered start (ramp 0-50, and the second stream's first token at 60), steady 60-300, then one
    # stream drains alone until 400.
    samples = [
        sample(0, 0, 100),
        sample(1, 50, 150),
        sample(2, 100, 200),
        sample(3, 150, 250),
        sample(4, 200, 300),
        sample(5, 250, 400),
    ]
    st = summarize(samples, concurrency=2)
    assert st.window is not None and st.window.steady
    assert (st.window.start_ns, st.window.end_ns) == (60 * MS, 300 * MS)
    # Tokens generated inside 60-300 ms (each spread over the gap before its arrival): request 0 4 of its
    # 10 (60-100), request 1 9, requests 2-4 10 each, request 5 (one per 15 ms from 250) 50/15.
    assert st.output_tok_s == pytest.approx((4 + 9 + 30 + 50 / 15) / 0.24)


def test_summary_warns_about_estimates_and_short_responses() -> None:
    s = sample(0, 0, 100)
    est = RequestSample(
        **{**{f: getattr(s, f) for f in s.__dataclass_fields__}, "estimated": True, "requested_tokens": 20}
    )
    st = summarize([est], 1)
    assert st.estimated == 1 and st.short == 1
    assert any("estimated" in w for w in st.warnings) and any("shorter" in w for w in st.warnings)


def test_summary_of_nothing_is_empty_not_an_error() -> None:
    st = summarize([], 4)
    assert st.sent == 0 and st.output_tok_s == 0.0 and st.window is None


def test_parse_prometheus_sums_label_sets_and_skips_comments() -> None:
    text = (
        "# HELP x\n# TYPE sglang:num_running_reqs gauge\n"
        'sglang:num_running_reqs{tp_rank="0"} 3.0\nsglang:num_running_reqs{tp_rank="1"} 2.0\n'
        "vllm:generation_tokens_total 1.5e3\nbad line\nnan_metric NaN\n"
    )
    m = parse_prometheus(text)
    assert m == {"sglang:num_running_reqs": 5.0, "vllm:generation_tokens_total": 1500.0}


def test_a_poll_reads_only_the_gauges_it_needs_as_the_whole_parse_reads_them() -> None:
    text = (
        "# HELP sglang:num_running_reqs The number of running requests.\n# TYPE sglang:num_running_reqs gauge\n"
        'sglang:num_running_reqs{model_name="a b{c}",tp_rank="0"} 3.0\nsglang:num_running_reqs{tp_rank="1"} 2\n'
        "sglang:num_queue_reqs 4 1733300000000\nsglang:gen_throughput\t812.5\n"
        "vllm:num_requests_running 7\nvllm:num_requests_waiting 1\n"
        "# TYPE sglang:time_to_first_token_seconds histogram\n"
        + "".join(
            f'sglang:time_to_first_token_seconds_bucket{{le="{b}"}} {i}\n' for i, b in enumerate((0.1, 1, "+Inf"))
        )
        + "sglang:time_to_first_token_seconds_sum 1.5\nsglang:generation_tokens_total 9000\n"
        'sglang:num_running_reqs_other 99\nsglang:num_queue_reqs{x="1"} NaN\n'
    )
    whole = parse_prometheus(text)
    polled = read_gauges(text)
    assert polled == {k: v for k, v in whole.items() if k in POLL_NAMES}
    assert polled == {"sglang:num_running_reqs": 5.0, "sglang:num_queue_reqs": 4.0, "sglang:gen_throughput": 812.5,
                      "vllm:num_requests_running": 7.0, "vllm:num_requests_waiting": 1.0}  # fmt: skip
    # What level_view reads from the polls is all in POLL_NAMES: the view is the same from either parse.
    assert level_view({}, {}, [polled], 1.0, None, None) == level_view({}, {}, [whole], 1.0, None, None)
    # What a hostile or broken server may send costs a line, never the poll.
    junk = 'sglang:num_running_reqs{tp_rank="0" 3\nsglang:num_running_reqs\nsglang:num_running_reqs abc\n\x00\n'
    assert read_gauges(junk + "sglang:num_running_reqs 2\n") == {"sglang:num_running_reqs": 2.0}


def test_vllm_view_from_counter_deltas() -> None:
    before = {"vllm:generation_tokens_total": 1000.0, "vllm:spec_decode_num_accepted_tokens_total": 100.0,
              "vllm:spec_decode_num_drafts_total": 50.0}  # fmt: skip
    after = {"vllm:generation_tokens_total": 3000.0, "vllm:spec_decode_num_accepted_tokens_total": 250.0,
             "vllm:spec_decode_num_drafts_total": 100.0}  # fmt: skip
    polls = [{"vllm:num_requests_running": 8.0, "vllm:num_requests_waiting": 0.0}]
    v = level_view(before, after, polls, wall_s=4.0, server_info=None, running_cap=None)
    assert v.tok_s == pytest.approx(500.0)
    assert v.generated_tokens == 2000.0  # the server's own count over the window
    assert v.accept_length == pytest.approx(1 + 150 / 50)
    assert v.max_running == 8.0
    assert level_view(None, None, polls, 4.0, None, None).generated_tokens is None


def test_sglang_view_falls_back_to_gauges_and_server_info() -> None:
    polls = [{"sglang:gen_throughput": 300.0}, {"sglang:gen_throughput": 500.0}, {"sglang:gen_throughput": 0.0}]
    info = {"internal_states": [{"avg_spec_accept_length": 2.4, "effective_max_running_requests_per_dp": 48}]}
    v = level_view({}, {}, polls, 1.0, info, running_cap(info))
    assert v.tok_s == pytest.approx(400.0) and "gen_throughput" in v.tok_s_source
    assert v.accept_length == pytest.approx(2.4)
    assert v.running_cap == 48
    assert running_cap({"max_running_requests": 32}) == 32
    assert running_cap(None) is None


def test_warnings_disagreement_cap_and_client_limit() -> None:
    view = ServerView(tok_s=1000.0, tok_s_source="x", running_cap=48)
    w = warnings_for(64, 850.0, view, ("probe CPU 95% of a core",))
    assert any("disagree by 15%" in x for x in w)
    assert any("caps running requests at 48" in x for x in w)
    assert any(x.startswith("client-limited") for x in w)
    assert warnings_for(8, 950.0, view, ()) == ()


def test_split_level_interleaves_indices_and_spreads_streams() -> None:
    plans = split_level(10, 3, 30)
    assert [p.concurrency for p in plans] == [4, 3, 3]
    sent = sorted(
        p.first_index + k * p.index_step for p in plans for k in range(30) if p.first_index + k * p.index_step < 30
    )
    assert sent == list(range(30))
    assert len(split_level(2, 8, None)) == 2
    assert processes_for(1, 64, 4) == 1
    assert processes_for(100, 64, 4) == 2
    assert processes_for(1000, 64, 4) == 4


def test_levels_urls_and_defaults_are_validated() -> None:
    assert validate_levels((10, 1, 5, 1)) == (1, 5, 10)
    for bad in ((0,), (1025,), ()):
        with pytest.raises(UsageError):
            validate_levels(bad)
    assert validate_url("http://127.0.0.1:30000/") == "http://127.0.0.1:30000"
    for bad_url in ("127.0.0.1:30000", "ftp://h:1", "http://h:99999", "http://h:1/v1", "http://"):
        with pytest.raises(UsageError):
            validate_url(bad_url)
    cfg = SweepConfig(levels=(1, 2, 50, 100), max_concurrency=50)
    assert cfg.effective_levels() == (1, 2, 50)
    assert cfg.requests_for(1) == 10 and cfg.requests_for(50) == 250
    assert SweepConfig(duration_s=5).requests_for(4) is None
    with pytest.raises(UsageError):
        SweepConfig(levels=(100,), max_concurrency=10).effective_levels()


def test_tables_render_levels_and_crossover() -> None:
    out = compare_table(["base#1", "eagle#2"], [{1: 70.0, 4: 220.0}, {1: 80.0, 4: 185.0}])
    assert "1.14x" in out and "0.84x" in out and "C≈" in out
    lt = level_table(
        [
            {
                "concurrency": 4,
                "status": "done",
                "stats": {"output_tok_s": 218.7, "failures": {"reset": 1}},
                "warnings": ["w1"],
            }
        ]
    )
    assert "218.7" in lt and "w1" in lt and "reset" in lt


def test_a_level_tables_warnings_fit_the_terminal_too() -> None:
    """At 100 columns a probe warning of 113 characters is wrapped, not left to run past the edge (the CI run of
    2026-12-06 12:47: `  C=4: client-limited: offered concurrency not sustained (...)`)."""
    warning = (
        "client-limited: offered concurrency not sustained (3.96 of 4 in flight on average, 1.1% of slot time idle)"
    )
    level = {"concurrency": 4, "status": "done", "stats": {"output_tok_s": 218.7}, "warnings": [warning]}
    lines = level_table([level], width=100).splitlines()
    assert max(len(line) for line in lines) <= 100, lines
    first = next(i for i, line in enumerate(lines) if "client-limited" in line)
    notes = lines[first:]
    assert notes[0].startswith("  C=4: client-limited") and len(notes) == 2 and notes[1].startswith("    ")
    assert " ".join(x.strip() for x in notes) == f"C=4: {warning}"
    assert f"  C=4: {warning}" in level_table([level])  # a pipe (no width) keeps it whole


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "--url", "http://127.0.0.1:1", "--levels", "0,2"],
        ["bench", "--url", "http://127.0.0.1:1", "--levels", "2000"],
        ["bench", "--url", "http://127.0.0.1:1", "--levels", "a,b"],
        ["bench", "--url", "not-a-url", "--levels", "1"],
        ["bench", "--levels", "1"],
    ],
)
def test_cli_usage_errors_exit_2_without_traceback(argv: list[str]) -> None:
    out = cli(*argv)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and "error" in out.stderr


def test_acceptance_per_position_and_draft_share() -> None:
    text = (
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 40\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",position="0"} 20\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="1"} 30\n'
    )
    after = parse_prometheus(text)
    assert after["vllm:spec_decode_num_accepted_tokens_per_pos_total"] == 90
    assert after["vllm:spec_decode_num_accepted_tokens_per_pos_total{position=0}"] == 60
    before = {k: 0.0 for k in after} | {"vllm:spec_decode_num_drafts_total": 0.0,
              "vllm:spec_decode_num_accepted_tokens_total": 0.0, "vllm:generation_tokens_total": 0.0}  # fmt: skip
    after |= {"vllm:spec_decode_num_drafts_total": 100.0, "vllm:spec_decode_num_accepted_tokens_total": 90.0,
              "vllm:generation_tokens_total": 190.0}  # fmt: skip
    v = level_view(before, after, [], 1.0, None, None)
    assert v.accept_per_position == pytest.approx((0.6, 0.3))
    assert v.draft_share == pytest.approx(90 / 190)
    # SGLang: every verify step yields one token of the target's own; the rest came from drafts.
    s = level_view({"sglang:generation_tokens_total": 0.0, "sglang:spec_verify_calls_total": 0.0},
                   {"sglang:generation_tokens_total": 300.0, "sglang:spec_verify_calls_total": 100.0}, [], 1.0,
                   None, None)  # fmt: skip
    assert s.draft_share == pytest.approx(2 / 3) and s.accept_length == pytest.approx(3.0)
