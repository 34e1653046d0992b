"""bench.http1's response parser: chunked, Content-Length and close-delimited bodies, split anywhere."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from specdash.bench.http1 import Outcome, _Response
from specdash.bench.samples import Failure
from specdash.bench.sse import Endpoint, StreamAccount


def events(n: int) -> list[bytes]:
    out = [
        b"data: " + json.dumps({"text": "t" * i, "meta_info": {"completion_tokens": 2 * i}}).encode() + b"\n\n"
        for i in range(1, n + 1)
    ]
    return [*out, b"data: [DONE]\n\n"]


def chunked(parts: list[bytes]) -> bytes:
    body = b"".join(b"%x\r\n" % len(p) + p + b"\r\n" for p in parts)
    return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n" + body + b"0\r\n\r\n"


def run(raw: bytes, cuts: list[int]) -> tuple[StreamAccount, list[tuple[Outcome, bool]]]:
    acct = StreamAccount(Endpoint.GENERATE)
    ends: list[tuple[Outcome, bool]] = []
    resp = _Response(acct, lambda outcome, reusable: ends.append((outcome, reusable)))
    bounds = [0, *sorted(set(cuts)), len(raw)]
    for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
        if a < b:
            resp.feed(raw[a:b], i)
    return acct, ends


@given(st.integers(1, 6), st.data())
def test_chunked_stream_split_anywhere_gives_the_same_tokens(n: int, data: st.DataObject) -> None:
    raw = chunked(events(n))
    cuts = data.draw(st.lists(st.integers(1, len(raw) - 1), max_size=12))
    acct, ends = run(raw, cuts)
    assert ends == [((200, None, ""), True)]
    assert acct.finish() == (2 * n, False)
    assert acct.done_ns is not None and acct.error is None


def test_several_events_per_http_chunk() -> None:
    raw = chunked([b"".join(events(3))])
    acct, ends = run(raw, [])
    assert ends[0][1] and acct.tokens == [2, 2, 2]


def test_content_length_error_body_is_reported() -> None:
    body = b'{"error": "overloaded"}'
    raw = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    _, ends = run(raw, [20, 40])
    (status, failure, detail), reusable = ends[0]
    assert (status, failure, reusable) == (503, Failure.HTTP_STATUS, True)
    assert "overloaded" in detail


def test_close_delimited_body_completes_at_connection_close() -> None:
    acct = StreamAccount(Endpoint.GENERATE)
    ends: list[tuple[Outcome, bool]] = []
    resp = _Response(acct, lambda outcome, reusable: ends.append((outcome, reusable)))
    resp.feed(b"HTTP/1.0 200 OK\r\n\r\n" + b"".join(events(2)), 1)
    assert ends == []
    resp.lost(None)
    assert ends == [((200, None, ""), False)] and acct.finish() == (4, False)


def test_connection_lost_mid_body_is_a_reset() -> None:
    acct = StreamAccount(Endpoint.GENERATE)
    ends: list[tuple[Outcome, bool]] = []
    resp = _Response(acct, lambda outcome, reusable: ends.append((outcome, reusable)))
    resp.feed(chunked(events(3))[:150], 1)
    resp.lost(ConnectionResetError("peer reset"))
    assert ends[0][0][1] is Failure.RESET and "peer reset" in ends[0][0][2]


def test_garbage_status_line_and_bad_chunk_size() -> None:
    _, ends = run(b"SSH-2.0-OpenSSH\r\n\r\n", [])
    assert ends[0][0][1] is Failure.MALFORMED
    _, ends = run(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nxx\r\n", [])
    assert ends[0][0][1] is Failure.RESET and "chunked" in ends[0][0][2]
