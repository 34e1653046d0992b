"""SSE splitting and token accounting for one streamed response (pure; the probe's hot path).

Why not parse every chunk: the client must stay far below the server's cost (≤ 25 µs of CPU per SSE event,
reference/measurement.md §12), so content chunks are inspected with byte searches. The cumulative token
count is read with one `rfind` of `"completion_tokens":`; that byte pattern can only be a real JSON key,
because a quote inside a JSON string is always escaped. JSON is parsed only where nothing cheaper works:
error events, chunks without a count (the fallback when the server ignores `continuous_usage_stats`) and
the final `/generate` chunk (for `spec_accept_length`).

Token accounting rules (reference/measurement.md §1-2):

- The output length is the server's count: the last cumulative `meta_info.completion_tokens` (`/generate`)
  or `usage.completion_tokens` (OpenAI endpoints). Chunks are never counted as tokens when a count exists.
- A chunk is *content* when it carries new tokens (its cumulative count grew) or, without counts, when it
  has non-empty text. The usage-only chunk (`"choices": []`) and `[DONE]` are never content.
- Per-chunk token counts are exact when every content chunk carried a cumulative count; otherwise each
  content chunk is credited 1 token and the remainder up to the server's total goes to the last one.
- Without any server count the output length is the number of content chunks, marked *estimated*.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from specdash.bench.compat import StrEnum
from specdash.bench.samples import Failure
from specdash.limits import MAX_SSE_EVENT_BYTES, MAX_TOKEN_COUNT, max_chunks
from specdash.safetext import escape_controls

_KEY = b'"completion_tokens":'
_KEY_LEN = len(_KEY)
_NUMBER = re.compile(rb"\s*(\d+)")


class Endpoint(StrEnum):
    """Which streaming API the probe talks to."""

    GENERATE = "generate"
    """SGLang's native `POST /generate` (cumulative `meta_info.completion_tokens`)."""
    CHAT = "chat"
    """`POST /v1/chat/completions`."""
    COMPLETIONS = "completions"
    """`POST /v1/completions`."""

    @property
    def path(self) -> str:
        """The URL path of the endpoint."""
        return {"generate": "/generate", "chat": "/v1/chat/completions", "completions": "/v1/completions"}[self.value]


def default_endpoint(engines: str | Iterable[str]) -> Endpoint:
    """The probe's endpoint when the user chose none: SGLang's native `/generate` when every engine measured is
    SGLang, else `/v1/completions` (vLLM has no `/generate`; SGLang serves the OpenAI routes too)."""
    names = {engines} if isinstance(engines, str) else set(engines)
    return Endpoint.GENERATE if names == {"sglang"} else Endpoint.COMPLETIONS


class MalformedStream(Exception):
    """The bytes are not the SSE stream the endpoint should send."""


class SseSplitter:
    """Splits a byte stream into SSE events on blank lines, whatever the read boundaries."""

    __slots__ = ("_buf", "_max")

    def __init__(self, max_event: int = MAX_SSE_EVENT_BYTES) -> None:
        """Create a splitter.

        Args:
            max_event: Largest event accepted, so a broken stream cannot grow the buffer without bound.
        """
        self._buf = b""
        self._max = max_event

    def feed(self, data: bytes) -> list[bytes]:
        """Add bytes; return the complete events they finish (without the blank-line separator)."""
        if self._buf:
            data = self._buf + data
        if b"\r" in data:
            # SSE allows CRLF and CR line ends; hold a trailing CR until we know whether LF follows.
            hold = data.endswith(b"\r")
            if hold:
                data = data[:-1]
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            if hold:
                data += b"\r"
        parts = data.split(b"\n\n")
        self._buf = parts.pop()
        if len(self._buf) > self._max:
            raise MalformedStream(f"SSE event larger than {self._max} bytes")
        return parts

    @property
    def pending(self) -> bytes:
        """Bytes of an unfinished event."""
        return self._buf


def event_data(event: bytes) -> bytes | None:
    """The data payload of one SSE event; None for comments and data-less events.

    Raises:
        MalformedStream: When a line is not an SSE field.
    """
    if event.startswith(b"data:") and b"\n" not in event:
        payload = event[5:]
        return payload[1:] if payload.startswith(b" ") else payload
    lines: list[bytes] = []
    for line in event.split(b"\n"):
        if line.startswith(b"data:"):
            value = line[5:]
            lines.append(value[1:] if value.startswith(b" ") else value)
        elif not line or line.startswith((b":", b"event:", b"id:", b"retry:")):
            continue
        else:
            raise MalformedStream(f"not an SSE line: {line[:60]!r}")
    return b"\n".join(lines) if lines else None


def cumulative_tokens(payload: bytes) -> int:
    """The last `"completion_tokens": N` in a JSON payload; -1 when absent or null."""
    i = payload.rfind(_KEY)
    if i < 0:
        return -1
    m = _NUMBER.match(payload, i + _KEY_LEN)
    return _count(m.group(1)) if m else -1


def _count(digits: bytes) -> int:
    """A token count, or `MalformedStream` for one no server can mean (10^20, or 5,000 digits)."""
    if len(digits) > 12 or int(digits) > MAX_TOKEN_COUNT:
        raise MalformedStream(
            f"token count {digits[:24].decode()}{'...' if len(digits) > 24 else ''} is not plausible"
            f" (limit {MAX_TOKEN_COUNT})"
        )
    return int(digits)


def _content_text(obj: Any) -> bool:
    """True when an OpenAI chunk object carries non-empty generated text."""
    if not isinstance(obj, dict):
        return False
    choices = obj.get("choices")
    if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
        return False
    c0 = choices[0]
    if c0.get("text"):
        return True
    delta = c0.get("delta")
    if isinstance(delta, dict):
        return bool(delta.get("content") or delta.get("reasoning_content") or delta.get("tool_calls"))
    return False


def _error_message(obj: Any) -> str | None:
    """The message of an in-stream error object, or None when `obj` is not one."""
    if not isinstance(obj, dict):
        return None
    err = obj.get("error")
    if err is not None:
        if isinstance(err, dict):
            return str(err.get("message", err))
        return str(err)
    if obj.get("object") == "error":
        return str(obj.get("message", "error"))
    return None


class StreamAccount:
    """Token accounting and timing for one streamed response, fed with raw reads as they arrive."""

    __slots__ = (
        "generate",
        "splitter",
        "times",
        "tokens",
        "cum",
        "usage_total",
        "exact",
        "done_ns",
        "error",
        "detail",
        "last_payload",
        "spec_accept_length",
        "harvested",
        "last_ns",
        "max_chunks",
    )

    def __init__(self, endpoint: Endpoint, output_len: int = 1 << 20) -> None:
        """Start accounting for a response from `endpoint` that asked for `output_len` tokens."""
        self.generate = endpoint is Endpoint.GENERATE
        self.max_chunks = max_chunks(output_len)
        """Content chunks kept at most (`specdash.limits.max_chunks`): more fails the request."""
        self.splitter = SseSplitter()
        self.times: list[int] = []
        """Arrival time (ns) of each content chunk."""
        self.tokens: list[int] = []
        """Tokens of each content chunk."""
        self.cum = 0
        self.usage_total = -1
        self.exact = True
        self.done_ns: int | None = None
        self.error: Failure | None = None
        self.detail = ""
        self.last_payload = b""
        self.spec_accept_length: float | None = None
        self.harvested = 0
        """How many content chunks the live rate ticker has already credited."""
        self.last_ns = 0
        """Arrival time of the latest read (for stall detection)."""

    @property
    def finished(self) -> bool:
        """True after `[DONE]` or an error."""
        return self.done_ns is not None or self.error is not None

    def feed(self, data: bytes, t_ns: int) -> None:
        """Account for one read of the body, received at `t_ns` (stamped before any parsing)."""
        self.last_ns = t_ns
        if self.done_ns is not None or self.error is not None:
            return
        try:
            # Fast path, the common case: this read is exactly one single-line `data:` event.
            if (
                not self.splitter._buf
                and data.startswith(b"data: ")
                and data.find(b"\n") == len(data) - 2
                and data.endswith(b"\n\n")
            ):
                self._payload(data[6:-2], t_ns)
                return
            for event in self.splitter.feed(data):
                payload = event_data(event)
                if payload is None:
                    continue
                self._payload(payload, t_ns)
                if self.finished:
                    return
        except MalformedStream as exc:
            self.fail(Failure.MALFORMED, str(exc))

    def fail(self, reason: Failure, detail: str) -> None:
        """Record the first failure; later ones are consequences and are ignored."""
        if self.error is None:
            self.error = reason
            self.detail = detail

    def _payload(self, payload: bytes, t_ns: int) -> None:
        if payload == b"[DONE]":
            self.done_ns = t_ns
            return
        if not payload.startswith(b"{"):
            raise MalformedStream(f"data is not a JSON object: {payload[:60]!r}")
        if payload.find(b'"error"', 0, 48) >= 0:
            obj = _loads(payload)
            msg = _error_message(obj)
            if msg is not None:
                self.fail(Failure.STREAM_ERROR, escape_controls(msg[:500]))
                return
        # cumulative_tokens(), inlined: this runs once per SSE event.
        i = payload.rfind(_KEY)
        m = _NUMBER.match(payload, i + _KEY_LEN) if i >= 0 else None
        if m is None:
            if self.generate:
                self.last_payload = payload
            self._uncounted(payload, t_ns)
            return
        cum = _count(m.group(1))
        if self.generate:
            self.last_payload = payload
        elif b'"choices":[]' in payload or b'"choices": []' in payload:
            # The usage-only chunk: the authoritative total, never content, never a timing point.
            self.usage_total = cum
            return
        delta = cum - self.cum
        if delta > 0:
            if len(self.times) >= self.max_chunks:
                raise MalformedStream(
                    f"more than {self.max_chunks} content chunks (the server ignores max_new_tokens?)"
                )
            self.times.append(t_ns)
            self.tokens.append(delta)
            self.cum = cum

    def _uncounted(self, payload: bytes, t_ns: int) -> None:
        # Fallback: the server sent no cumulative count on this chunk, so look at the text itself.
        obj = _loads(payload)
        text = obj.get("text") if self.generate and isinstance(obj, dict) else None
        if (self.generate and text) or (not self.generate and _content_text(obj)):
            if len(self.times) >= self.max_chunks:
                raise MalformedStream(
                    f"more than {self.max_chunks} content chunks (the server ignores max_new_tokens?)"
                )
            self.times.append(t_ns)
            self.tokens.append(1)
            self.exact = False

    def finish(self) -> tuple[int, bool]:
        """Settle the totals at the end of the stream.

        Returns:
            (output tokens, estimated): the server's count when it sent one, else the number of content
            chunks with `estimated=True`. The per-chunk tokens are adjusted to sum to the total.
        """
        if self.generate and self.last_payload:
            self._final_generate_chunk()
        total = self.usage_total if self.usage_total >= 0 else (self.cum if self.cum > 0 else -1)
        if total < 0:
            if not self.exact or not self.tokens:
                return len(self.tokens), True
            total = sum(self.tokens)
        credited = sum(self.tokens)
        if credited != total and self.tokens:
            # Counts were partial (no per-chunk usage): the remainder arrived with the last content chunk.
            self.tokens[-1] = max(1, self.tokens[-1] + total - credited)
            self.exact = False
        return total, False

    def _final_generate_chunk(self) -> None:
        try:
            obj = json.loads(self.last_payload)
        except (ValueError, RecursionError):
            self.fail(Failure.MALFORMED, "final /generate chunk is not JSON")
            return
        meta = obj.get("meta_info") if isinstance(obj, dict) else None
        if not isinstance(meta, dict):
            return
        sal = meta.get("spec_accept_length")
        if isinstance(sal, (int, float)):
            self.spec_accept_length = float(sal)
        fin = meta.get("finish_reason")
        if isinstance(fin, dict) and fin.get("type") == "abort":
            self.fail(Failure.STREAM_ERROR, escape_controls(f"aborted: {fin.get('message', '')}"[:500]))


def _loads(payload: bytes) -> Any:
    try:
        return json.loads(payload)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than the parser goes
        raise MalformedStream(f"bad JSON in SSE data ({type(exc).__name__}): {payload[:60]!r}") from None
