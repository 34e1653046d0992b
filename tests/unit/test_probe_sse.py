"""bench.sse and bench.samples: SSE splitting, token accounting from server counts, failure classes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specdash.bench.samples import Failure, RequestSample
from specdash.bench.sse import (
    Endpoint,
    MalformedStream,
    SseSplitter,
    StreamAccount,
    cumulative_tokens,
    event_data,
)


def sse(obj: Any) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


def gen_chunk(cum: int, final: bool = False, **meta: Any) -> bytes:
    m: dict[str, Any] = {"id": "r", "finish_reason": None, "prompt_tokens": 5, "completion_tokens": cum}
    if final:
        m["finish_reason"] = {"type": "length", "length": cum}
    m.update(meta)
    return sse({"text": "x" * cum, "output_ids": list(range(cum)), "meta_info": m})


def chat_chunk(text: str, cum: int | None = None) -> bytes:
    obj: dict[str, Any] = {
        "id": "c",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": text}}],
    }
    if cum is not None:
        obj["usage"] = {"prompt_tokens": 5, "completion_tokens": cum, "total_tokens": 5 + cum}
    return sse(obj)


def usage_chunk(n: int) -> bytes:
    return sse({"id": "c", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": n, "total_tokens": 5 + n}})


def feed_all(acct: StreamAccount, reads: list[tuple[bytes, int]]) -> tuple[int, bool]:
    for data, t in reads:
        acct.feed(data, t)
    return acct.finish()


# --- splitting -------------------------------------------------------------------------------------------


@given(
    st.lists(
        st.binary(min_size=1, max_size=40).filter(lambda b: b"\n" not in b and b"\r" not in b), min_size=1, max_size=8
    ),
    st.data(),
)
def test_splitter_is_independent_of_read_boundaries(payloads: list[bytes], data: st.DataObject) -> None:
    stream = b"".join(b"data: " + p + b"\n\n" for p in payloads)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    s = SseSplitter()
    events = [e for piece in pieces for e in s.feed(piece)]
    assert [event_data(e) for e in events] == payloads
    assert s.pending == b""


def test_splitter_handles_crlf_split_across_reads() -> None:
    s = SseSplitter()
    assert s.feed(b"data: a\r\n\r") == []
    assert s.feed(b"\ndata: b\r\n\r\n") == [b"data: a", b"data: b"]


def test_splitter_bounds_an_endless_event() -> None:
    s = SseSplitter(max_event=10)
    with pytest.raises(MalformedStream):
        s.feed(b"data: " + b"x" * 20)


def test_event_data_fields_comments_and_garbage() -> None:
    assert event_data(b"data: {}") == b"{}"
    assert event_data(b"data:{}") == b"{}"
    assert event_data(b": ping") is None
    assert event_data(b"event: message\ndata: a\ndata: b") == b"a\nb"
    with pytest.raises(MalformedStream):
        event_data(b"garbage")


def test_cumulative_tokens_reads_only_real_keys() -> None:
    assert cumulative_tokens(b'{"meta_info":{"completion_tokens":12}}') == 12
    assert cumulative_tokens(b'{"usage": {"completion_tokens": 7}}') == 7
    assert cumulative_tokens(b'{"usage":null}') == -1
    assert cumulative_tokens(b'{"usage":{"completion_tokens":null}}') == -1
    # Generated text that mentions the key is escaped in JSON, so it never matches.
    text = json.dumps({"text": 'say "completion_tokens": 999', "meta_info": {"completion_tokens": 3}}).encode()
    assert cumulative_tokens(text) == 3
    assert cumulative_tokens(json.dumps({"text": '"completion_tokens": 5'}).encode()) == -1
    assert cumulative_tokens(b'{"usage":{"completion_tokens_details":{},"completion_tokens":4}}') == 4


# --- /generate -------------------------------------------------------------------------------------------


def test_generate_multi_token_chunks_count_server_tokens_not_chunks() -> None:
    acct = StreamAccount(Endpoint.GENERATE)
    reads = [
        (gen_chunk(3), 10),
        (gen_chunk(6), 20),
        (gen_chunk(8, final=True, spec_accept_length=2.67), 30),
        (sse(b"[DONE]"), 40),
    ]
    total, estimated = feed_all(acct, reads)
    assert (total, estimated) == (8, False)
    assert acct.tokens == [3, 3, 2] and acct.times == [10, 20, 30]
    assert acct.exact and acct.done_ns == 40
    assert acct.spec_accept_length == pytest.approx(2.67)


def test_generate_several_events_in_one_read_share_its_timestamp() -> None:
    acct = StreamAccount(Endpoint.GENERATE)
    total, _ = feed_all(acct, [(gen_chunk(1) + gen_chunk(2) + gen_chunk(4, final=True) + sse(b"[DONE]"), 99)])
    assert total == 4 and acct.times == [99, 99, 99] and acct.tokens == [1, 1, 2]


def test_generate_abort_finish_reason_is_a_stream_error() -> None:
    acct = StreamAccount(Endpoint.GENERATE)
    feed_all(acct, [(gen_chunk(2, finish_reason={"type": "abort", "message": "oom"}), 1), (sse(b"[DONE]"), 2)])
    assert acct.error is Failure.STREAM_ERROR and "oom" in acct.detail


# --- OpenAI endpoints ------------------------------------------------------------------------------------


def test_chat_with_continuous_usage_gives_exact_per_chunk_counts() -> None:
    acct = StreamAccount(Endpoint.CHAT)
    first = sse(
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}], "usage": {"completion_tokens": 0}}
    )
    reads = [
        (first, 1),
        (chat_chunk("ab", 2), 10),
        (chat_chunk("cde", 5), 20),
        (usage_chunk(5), 30),
        (sse(b"[DONE]"), 40),
    ]
    total, estimated = feed_all(acct, reads)
    assert (total, estimated) == (5, False)
    # The role-only chunk and the usage chunk are not content: first token at 10, last at 20.
    assert acct.times == [10, 20] and acct.tokens == [2, 3] and acct.exact


def test_include_usage_only_credits_remainder_to_last_content_chunk() -> None:
    acct = StreamAccount(Endpoint.COMPLETIONS)
    c = [sse({"choices": [{"index": 0, "text": t}]}) for t in ("a", "b", "c")]
    reads = [(c[0], 10), (c[1], 20), (c[2], 30), (usage_chunk(9), 35), (sse(b"[DONE]"), 36)]
    total, estimated = feed_all(acct, reads)
    assert (total, estimated) == (9, False)
    assert acct.times == [10, 20, 30]
    assert acct.tokens == [1, 1, 7] and not acct.exact


def test_no_usage_at_all_is_estimated_from_chunks() -> None:
    acct = StreamAccount(Endpoint.CHAT)
    reads = [(chat_chunk("a"), 1), (chat_chunk(""), 2), (chat_chunk("b"), 3), (sse(b"[DONE]"), 4)]
    total, estimated = feed_all(acct, reads)
    assert (total, estimated) == (2, True)
    assert acct.times == [1, 3]


def test_usage_with_spaces_and_compact_json_read_the_same() -> None:
    for spaces in (True, False):
        seps = (", ", ": ") if spaces else (",", ":")
        obj = {"choices": [{"index": 0, "text": "abc"}], "usage": {"completion_tokens": 3}}
        acct = StreamAccount(Endpoint.COMPLETIONS)
        usage = {"choices": [], "usage": {"completion_tokens": 3}}
        reads = [
            (b"data: " + json.dumps(obj, separators=seps).encode() + b"\n\n", 5),
            (b"data: " + json.dumps(usage, separators=seps).encode() + b"\n\n", 6),
            (sse(b"[DONE]"), 7),
        ]
        assert feed_all(acct, reads) == (3, False)
        assert acct.times == [5]


@pytest.mark.parametrize(
    ("reads", "reason"),
    [
        ([b'data: {"error": {"message": "bad request"}}\n\n'], Failure.STREAM_ERROR),
        ([b'data: {"object": "error", "message": "too long"}\n\n'], Failure.STREAM_ERROR),
        ([b"data: {not json\n\n"], Failure.MALFORMED),
        ([b"data: [1, 2]\n\n"], Failure.MALFORMED),
        ([b"hello\n\n"], Failure.MALFORMED),
    ],
)
def test_stream_failures_are_classified(reads: list[bytes], reason: Failure) -> None:
    acct = StreamAccount(Endpoint.CHAT)
    for r in reads:
        acct.feed(r, 1)
    assert acct.error is reason and acct.finished


def test_text_that_is_the_word_error_is_not_an_error() -> None:
    acct = StreamAccount(Endpoint.GENERATE)
    payload = json.dumps({"text": "error", "meta_info": {"completion_tokens": 1}}).encode()
    acct.feed(sse(payload), 1)
    assert acct.error is None and acct.tokens == [1]


def test_feed_after_done_is_ignored() -> None:
    acct = StreamAccount(Endpoint.GENERATE)
    acct.feed(gen_chunk(2, final=True) + sse(b"[DONE]"), 5)
    acct.feed(gen_chunk(50), 6)
    assert acct.finish() == (2, False)


# --- sample metrics --------------------------------------------------------------------------------------


def make_sample(**kw: Any) -> RequestSample:
    base: dict[str, Any] = dict(
        index=0, prompt_index=0, worker=0, error=None, detail="", http_status=200, scheduled_ns=0,
        start_ns=1_000_000, end_ns=101_000_000, first_token_ns=21_000_000, last_token_ns=101_000_000,
        output_tokens=9, requested_tokens=9, estimated=False, per_chunk_exact=True,
        chunk_offsets_us=(20_000, 60_000, 100_000), chunk_tokens=(1, 4, 4),
    )  # fmt: skip
    base.update(kw)
    return RequestSample(**base)


def test_sample_metrics_follow_the_standard_definitions() -> None:
    s = make_sample()
    assert s.ttft_ms == pytest.approx(20.0)
    assert s.e2e_ms == pytest.approx(100.0)
    assert s.tpot_ms == pytest.approx(80.0 / 8)  # (last - first) / (n - 1)
    assert s.per_request_tok_s == pytest.approx(8 / 0.080)
    assert s.itl_chunk_ms() == [40.0, 40.0]
    assert s.itl_token_ms() == [10.0] * 8
    assert s.client_queue_ms == pytest.approx(1.0)
    assert s.credits() == [(21_000_000, 1), (61_000_000, 4), (101_000_000, 4)]
    assert s.ok and not s.short


def test_short_and_failed_samples() -> None:
    assert make_sample(output_tokens=5, requested_tokens=9).short
    failed = make_sample(error=Failure.RESET, first_token_ns=None, last_token_ns=None, output_tokens=0)
    assert not failed.ok and failed.ttft_ms is None and failed.tpot_ms is None
    assert make_sample(output_tokens=1).tpot_ms is None
