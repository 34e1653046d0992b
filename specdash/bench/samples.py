"""The probe's records: one `RequestSample` per request, and why a request failed.

Samples are plain, picklable and compact because probe worker processes send one over a pipe for every
finished request. Times are absolute `perf_counter_ns` stamps (CLOCK_MONOTONIC, comparable across the
processes of one machine); per-chunk data is kept as offsets from the request's start.
"""

from __future__ import annotations

from dataclasses import dataclass

from specdash.bench.compat import SLOTS, StrEnum

NS_PER_MS = 1_000_000


class Failure(StrEnum):
    """Why a request failed. Every failed request is recorded with one of these, never dropped."""

    HTTP_STATUS = "http_status"
    """The server answered with a status other than 200 (the status is in `RequestSample.http_status`)."""
    REFUSED = "refused"
    """The connection could not be opened (connection refused, unreachable)."""
    RESET = "reset"
    """The connection broke mid-request or mid-stream (reset, server disconnected, bad chunked encoding)."""
    MALFORMED = "malformed_sse"
    """The stream was not the SSE/JSON the endpoint should send."""
    STREAM_ERROR = "stream_error"
    """The server reported an error inside the stream (`{"error": ...}` or an abort finish reason)."""
    EOF = "eof_before_done"
    """The stream ended cleanly but without `data: [DONE]`."""
    TIMEOUT = "timeout"
    """The request exceeded its total time limit."""
    STALL = "stall"
    """No bytes arrived for the stall limit."""
    CLIENT = "client_error"
    """Anything else raised on our side (a bug, not the server's fault; still counted)."""


CONNECTION_FAILURES = frozenset({Failure.REFUSED, Failure.RESET})
"""Failures that mean the server (or the tunnel to it) went away rather than rejected one request."""


@dataclass(frozen=True, **SLOTS)  # slots: one per request, kept by the thousand
class RequestSample:
    """One request, finished or failed, as the probe saw it."""

    index: int
    """The request's position in the level's request sequence (prompt order is derived from it)."""
    prompt_index: int
    """Which prompt of the prompt set was sent."""
    worker: int
    """The probe process that sent it."""
    error: Failure | None
    """None when the request succeeded."""
    detail: str
    """Human-readable detail of a failure (status text, exception, server message); empty when ok."""
    http_status: int | None
    """The HTTP status, when a response arrived."""
    scheduled_ns: int
    """When the load loop wanted to send it (a slot became free)."""
    start_ns: int
    """Just before the request was written."""
    end_ns: int
    """When the stream finished (`[DONE]`) or the failure was noticed."""
    first_token_ns: int | None
    """Arrival of the first chunk with content (stamped before parsing)."""
    last_token_ns: int | None
    """Arrival of the last chunk with content (not the usage chunk, not `[DONE]`)."""
    output_tokens: int
    """Generated tokens: the server's count when it sent one, else the number of content chunks."""
    requested_tokens: int
    """`max_tokens` / `max_new_tokens` asked for."""
    estimated: bool
    """True when the server sent no token count and `output_tokens` counts chunks instead."""
    per_chunk_exact: bool
    """True when every chunk's token count came from the server (cumulative counts); otherwise the
    chunk counts are 1 per content chunk with the remainder credited to the last content chunk."""
    chunk_offsets_us: tuple[int, ...]
    """Arrival of each content chunk, in µs after `start_ns`."""
    chunk_tokens: tuple[int, ...]
    """Tokens carried by each content chunk (same length as `chunk_offsets_us`)."""
    spec_accept_length: float | None = None
    """Per-request acceptance length from SGLang `/generate`'s final `meta_info`, when present."""

    @property
    def ok(self) -> bool:
        """True when the request succeeded."""
        return self.error is None

    @property
    def short(self) -> bool:
        """True when fewer tokens were generated than requested (EOS, server cap, abort)."""
        return self.output_tokens < self.requested_tokens

    @property
    def client_queue_ms(self) -> float:
        """Delay between the scheduled and the actual send: the probe's own queueing."""
        return (self.start_ns - self.scheduled_ns) / NS_PER_MS

    @property
    def e2e_ms(self) -> float:
        """End-to-end latency (start to `[DONE]`)."""
        return (self.end_ns - self.start_ns) / NS_PER_MS

    @property
    def ttft_ms(self) -> float | None:
        """Time to first token (first content chunk)."""
        return None if self.first_token_ns is None else (self.first_token_ns - self.start_ns) / NS_PER_MS

    @property
    def tpot_ms(self) -> float | None:
        """(E2E - TTFT) / (n - 1), with E2E ending at the last content chunk; None for n < 2."""
        if self.first_token_ns is None or self.last_token_ns is None or self.output_tokens < 2:
            return None
        return (self.last_token_ns - self.first_token_ns) / NS_PER_MS / (self.output_tokens - 1)

    @property
    def per_request_tok_s(self) -> float | None:
        """(n - 1) / (last content - first content): the decode rate one user sees."""
        if self.first_token_ns is None or self.last_token_ns is None or self.output_tokens < 2:
            return None
        span = self.last_token_ns - self.first_token_ns
        return (self.output_tokens - 1) * 1e9 / span if span > 0 else None

    def itl_chunk_ms(self) -> list[float]:
        """Inter-chunk latencies (ITL per chunk, AIPerf's ICL): one per content chunk after the first."""
        offs = self.chunk_offsets_us
        return [(offs[i] - offs[i - 1]) / 1000.0 for i in range(1, len(offs))]

    def itl_token_ms(self) -> list[float]:
        """ITL per token: each inter-chunk gap spread evenly over that chunk's tokens (SGLang's native fix)."""
        out: list[float] = []
        offs, toks = self.chunk_offsets_us, self.chunk_tokens
        for i in range(1, len(offs)):
            n = max(1, toks[i])
            out.extend([(offs[i] - offs[i - 1]) / 1000.0 / n] * n)
        return out

    def credits(self) -> list[tuple[int, int]]:
        """(absolute arrival ns, tokens) per content chunk, for rate windows."""
        base = self.start_ns
        offs, toks = self.chunk_offsets_us, self.chunk_tokens
        if len(offs) != len(toks):  # zip(strict=True) is 3.10 and this module runs on 3.9 (bench.compat)
            raise ValueError(f"a sample has {len(offs)} chunk offsets but {len(toks)} chunk token counts")
        return [(base + off * 1000, tok) for off, tok in zip(offs, toks)]
