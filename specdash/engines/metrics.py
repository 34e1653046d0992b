"""The server's own view of its load, as typed records parsed from its periodic log lines.

Rates and usages are fractions in [0, 1] whatever the log printed (`6.3%` becomes 0.063), so that a
dashboard can compare SGLang and vLLM without knowing which printed a percent sign. A field is None when
that engine version did not print it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class BatchStats:
    """One SGLang `Prefill batch` or `Decode batch` line (every version from 2024 to 2026)."""

    kind: Literal["prefill", "decode"]
    """Which scheduler step printed it."""
    running_reqs: int | None = None
    """`#running-req`: requests being decoded (server-side concurrency)."""
    queue_reqs: int | None = None
    """`#queue-req`: requests waiting for admission."""
    tokens: int | None = None
    """`#token` (or `#full token` on hybrid-SWA models): KV tokens in use."""
    token_usage: float | None = None
    """`token usage` (or `full token usage`): fraction of the KV pool in use."""
    accept_len: float | None = None
    """`accept len`: (accepted drafts + bonus) per verify step over the interval; spec only."""
    accept_rate: float | None = None
    """`accept rate`: not comparable across versions (engines.md 5.4); spec only."""
    gen_throughput: float | None = None
    """`gen throughput (token/s)`: aggregate decode tok/s since the previous Decode line."""
    input_throughput: float | None = None
    """`input throughput (token/s)`: 2026 Prefill lines."""
    graph: bool | None = None
    """`cuda graph` (or `npu graph` / `cpu graph`): whether the step ran as a captured graph."""
    new_seqs: int | None = None
    """`#new-seq` (Prefill)."""
    new_tokens: int | None = None
    """`#new-token` (Prefill)."""
    cached_tokens: int | None = None
    """`#cached-token` (Prefill)."""
    cache_hit_rate: float | None = None
    """`cache hit rate` (Prefill, before 2025-03)."""
    pending_tokens: int | None = None
    """`#pending-token` (Prefill, 2026-04+)."""
    swa_tokens: int | None = None
    """`#swa token` (hybrid-SWA models)."""
    swa_token_usage: float | None = None
    """`swa token usage` (hybrid-SWA models)."""
    forward_iter: int | None = None
    """`N` in `Decode batch [N],` (`SGLANG_LOG_FORWARD_ITERS`)."""


@dataclass(frozen=True, slots=True)
class EngineStats:
    """One vLLM stats line: `Engine 000: Avg prompt throughput: ... Running: N reqs, Waiting: N reqs, ...`."""

    engine: int = 0
    """The `Engine NNN` index (0 when the line had no index, as in V0 and early V1)."""
    prompt_throughput: float | None = None
    """`Avg prompt throughput` in tokens/s over the last interval."""
    gen_throughput: float | None = None
    """`Avg generation throughput` in tokens/s over the last interval."""
    running_reqs: int | None = None
    """`Running: N reqs`."""
    waiting_reqs: int | None = None
    """`Waiting: N reqs` (V0: `Pending`)."""
    kv_cache_usage: float | None = None
    """`GPU KV cache usage` or `CPU KV cache usage`, as a fraction."""
    prefix_cache_hit_rate: float | None = None
    """`Prefix cache hit rate`, as a fraction."""
    preemptions: int | None = None
    """`Preemptions: N`, when printed."""


@dataclass(frozen=True, slots=True)
class SpecDecodeStats:
    """One vLLM `SpecDecoding metrics:` line (2025-04 to 2026) or V0 `Speculative metrics:` line."""

    mean_acceptance_length: float | None = None
    """`Mean acceptance length` (includes the bonus token)."""
    draft_acceptance_rate: float | None = None
    """`Draft acceptance rate` / `Avg Draft acceptance rate`, as a fraction."""
    accepted_throughput: float | None = None
    """`Accepted throughput` in tokens/s."""
    drafted_throughput: float | None = None
    """`Drafted throughput` in tokens/s."""
    accepted_tokens: int | None = None
    """`Accepted: N tokens` (V0: `Number of accepted tokens`)."""
    drafted_tokens: int | None = None
    """`Drafted: N tokens` (V0: `Number of draft tokens`)."""
    per_position: tuple[float, ...] = ()
    """`Per-position acceptance rate` values, first draft position first."""
    system_efficiency: float | None = None
    """V0 `System efficiency`."""


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """Capacity figures printed once at startup."""

    max_total_tokens: int | None = None
    """SGLang `max_total_num_tokens`; vLLM `GPU/CPU KV cache size: N tokens`."""
    max_running_requests: int | None = None
    """SGLang `max_running_requests`: the effective cap (48 with spec unless overridden)."""
    context_len: int | None = None
    """SGLang `context_len`."""
    chunked_prefill_size: int | None = None
    """SGLang `chunked_prefill_size`."""
    max_prefill_tokens: int | None = None
    """SGLang `max_prefill_tokens`."""
    max_concurrency: float | None = None
    """vLLM `Maximum concurrency for N tokens per request: X.XXx`."""


def to_float(text: str) -> float | None:
    """Parse `12.5`, `1,048,576` or `6.49x`; None when it is no number (see `to_fraction` for `6.3%`)."""
    text = text.strip().rstrip("x").replace(",", "")
    try:
        return float(text)
    except ValueError:
        return None


def to_int(text: str) -> int | None:
    """Parse `2049` or `1,048,576`; None when it is no integer."""
    # int() accepts what str.isdigit() does not promise (and vice versa: '²'), so just try it.
    try:
        return int(text.strip().replace(",", ""))
    except ValueError:
        return None


def to_fraction(text: str) -> float | None:
    """Parse a rate: `75.1%` is 0.751, a bare `0.642` stays 0.642."""
    text = text.strip()
    if text.endswith("%"):
        value = to_float(text[:-1])
        return None if value is None else value / 100.0
    return to_float(text)


def first_word(text: str) -> str:
    """The first space-separated word (`12.2 tokens/s` -> `12.2`)."""
    return text.strip().split(" ", 1)[0]
