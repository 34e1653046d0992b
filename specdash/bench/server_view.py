"""The server's own view of a level, read next to the client's (reference/measurement.md §5, §7, §10).

Read before and after each level (never `/health`, which injects generations into SGLang's batch):

- SGLang throughput: Δ`sglang:generation_tokens_total` / wall, else the mean of the `sglang:gen_throughput`
  gauge polled during the level.
- SGLang acceptance length: Δ`generation_tokens` / Δ`spec_verify_calls` (HEAD), else `/server_info`
  `internal_states[0].avg_spec_accept_length` read after the level (lifetime, or since the last idle flush),
  else the `sglang:spec_accept_length` gauge.
- SGLang concurrency: max of `sglang:num_running_reqs` / `num_queue_reqs`; `max_running_requests` from
  `/server_info`.
- vLLM: Δ`vllm:generation_tokens_total` / wall; acceptance length 1 + Δ`spec_decode_num_accepted_tokens` /
  Δ`spec_decode_num_drafts`; max of `vllm:num_requests_running` / `waiting`.

The pure part (`parse_prometheus`, `level_view`) is separated from the HTTP part (`ServerClient`, on httpx:
the control plane's one client; the probe's streams use `specdash.bench.http1`).
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import ssl
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from specdash.bench.gauges import read_gauges
from specdash.limits import MAX_CONTROL_BODY_BYTES
from specdash.safetext import escape_controls, escape_controls_in

DISAGREE_FRACTION = 0.10
"""Client and server throughput differing by more than this fraction produce a warning."""


def parse_prometheus(text: str) -> dict[str, float]:
    """Prometheus text exposition -> sample name -> value summed over label sets (NaN and comments skipped).

    A series with a `position` label (vLLM's per-position acceptance counter) is also kept on its own as
    `name{position=N}` (summed over its other labels, e.g. engines).

    Parsed by `prometheus_client`'s parser. One malformed line makes it reject the whole text, so then each
    line is parsed alone and the bad ones are skipped: one odd metric must not hide the others.
    """
    out: dict[str, float] = {}
    try:
        _add_samples(out, text_string_to_metric_families(text))
    except ValueError:
        out.clear()
        for line in text.splitlines():
            try:
                _add_samples(out, text_string_to_metric_families(line + "\n"))
            except ValueError:
                continue
    return out


def _add_samples(out: dict[str, float], families: Iterable[Any]) -> None:
    found: dict[str, float] = {}
    for family in families:
        for sample in family.samples:
            value = float(sample.value)
            if not math.isnan(value):
                found[sample.name] = found.get(sample.name, 0.0) + value
                pos = sample.labels.get("position")
                if pos is not None and pos.isdigit():
                    key = f"{sample.name}{{position={pos}}}"
                    found[key] = found.get(key, 0.0) + value
    for name, value in found.items():  # added only once the text (or line) parsed whole
        out[name] = out.get(name, 0.0) + value


@dataclass(frozen=True)
class ServerView:
    """What the server reported about one level."""

    tok_s: float | None = None
    """Server-side output tok/s over the level."""
    tok_s_source: str = ""
    """Which metric `tok_s` came from."""
    generated_tokens: float | None = None
    """The server's own count of output tokens over the level's window: Δ`generation_tokens_total` between the
    reads before the first and after the last measured request (the reference for the client's token count)."""
    accept_length: float | None = None
    """Server-side mean acceptance length."""
    accept_source: str = ""
    """Which metric `accept_length` came from."""
    max_running: float | None = None
    """Most running requests seen while polling."""
    max_queued: float | None = None
    """Most queued requests seen while polling."""
    running_cap: int | None = None
    """The server's cap on running requests (`max_running_requests`), when known."""
    accept_per_position: tuple[float, ...] = ()
    """vLLM: share of drafts whose token at position i was accepted (Δ per-position accepted / Δdrafts)."""
    draft_share: float | None = None
    """Share of the level's output tokens that came from accepted drafts (vLLM Δaccepted / Δgenerated;
    SGLang 1 - Δverify calls / Δgenerated: every verify step also yields one token of the target's own)."""


def _delta(before: Mapping[str, float], after: Mapping[str, float], name: str) -> float | None:
    if name in before and name in after:
        return after[name] - before[name]
    return None


def level_view(
    before: Mapping[str, float] | None,
    after: Mapping[str, float] | None,
    polls: Sequence[Mapping[str, float]],
    wall_s: float,
    server_info: Mapping[str, Any] | None,
    running_cap: int | None,
) -> ServerView:
    """Combine the metric snapshots around a level into the server's view (pure)."""
    b = before or {}
    a = after or {}
    tok_s: float | None = None
    tok_src = ""
    generated: float | None = None
    for name in ("sglang:generation_tokens_total", "vllm:generation_tokens_total"):
        d = _delta(b, a, name)
        if d is not None and generated is None:
            generated = d
        if d is not None and d > 0 and wall_s > 0:
            tok_s, tok_src = d / wall_s, f"Δ{name}"
            break
    if tok_s is None:
        gauge = [p["sglang:gen_throughput"] for p in polls if p.get("sglang:gen_throughput", 0) > 0]
        if gauge:
            tok_s, tok_src = sum(gauge) / len(gauge), "sglang:gen_throughput (mean of polls)"
    accept: float | None = None
    acc_src = ""
    d_acc = _delta(b, a, "vllm:spec_decode_num_accepted_tokens_total")
    d_drafts = _delta(b, a, "vllm:spec_decode_num_drafts_total")
    d_gen = _delta(b, a, "sglang:generation_tokens_total")
    d_verify = _delta(b, a, "sglang:spec_verify_calls_total")
    if d_acc is not None and d_drafts:
        accept, acc_src = 1.0 + d_acc / d_drafts, "1 + Δvllm accepted / Δdrafts"
    elif d_gen is not None and d_verify:
        accept, acc_src = d_gen / d_verify, "Δsglang generation_tokens / Δspec_verify_calls"
    else:
        states = (server_info or {}).get("internal_states")
        if isinstance(states, list) and states and isinstance(states[0], dict):
            v = states[0].get("avg_spec_accept_length")
            if isinstance(v, int | float) and v > 0:
                accept, acc_src = float(v), "/server_info avg_spec_accept_length"
        if accept is None and a.get("sglang:spec_accept_length", 0) > 0:
            accept, acc_src = a["sglang:spec_accept_length"], "sglang:spec_accept_length gauge"
    per_position: list[float] = []
    if d_drafts:
        for i in range(64):
            d = _delta(b, a, f"vllm:spec_decode_num_accepted_tokens_per_pos_total{{position={i}}}")
            if d is None:
                break
            per_position.append(d / d_drafts)
    share = None
    d_vgen = _delta(b, a, "vllm:generation_tokens_total")
    if d_acc is not None and d_vgen:
        share = d_acc / d_vgen
    elif d_gen and d_verify is not None:
        share = max(0.0, 1.0 - d_verify / d_gen)
    running = [p[n] for p in polls for n in ("sglang:num_running_reqs", "vllm:num_requests_running") if n in p]
    queued = [p[n] for p in polls for n in ("sglang:num_queue_reqs", "vllm:num_requests_waiting") if n in p]
    return ServerView(
        tok_s=tok_s,
        tok_s_source=tok_src,
        generated_tokens=generated,
        accept_length=accept,
        accept_source=acc_src,
        max_running=max(running) if running else None,
        max_queued=max(queued) if queued else None,
        running_cap=running_cap,
        accept_per_position=tuple(per_position),
        draft_share=share,
    )


def running_cap(server_info: Mapping[str, Any] | None) -> int | None:
    """`max_running_requests` from SGLang's `/server_info` (top level or first DP rank)."""
    if not server_info:
        return None
    candidates: list[Any] = [server_info.get("max_running_requests")]
    states = server_info.get("internal_states")
    if isinstance(states, list) and states and isinstance(states[0], dict):
        candidates += [states[0].get("effective_max_running_requests_per_dp"), states[0].get("max_running_requests")]
    for c in candidates:
        if isinstance(c, int) and c > 0:
            return c
    return None


def warnings_for(
    concurrency: int, client_tok_s: float, view: ServerView, client_limited: tuple[str, ...]
) -> tuple[str, ...]:
    """Warnings shown next to a level: disagreement, server caps, client limits."""
    out: list[str] = []
    if view.tok_s and client_tok_s > 0:
        diff = abs(client_tok_s - view.tok_s) / view.tok_s
        if diff > DISAGREE_FRACTION:
            out.append(
                f"client and server disagree by {diff:.0%} "
                f"({client_tok_s:.0f} vs {view.tok_s:.0f} tok/s, {view.tok_s_source})"
            )
    if view.running_cap is not None and view.running_cap < concurrency:
        out.append(f"server caps running requests at {view.running_cap} (< C={concurrency}): the rest queue")
    elif view.max_queued:
        out.append(f"server queued up to {view.max_queued:.0f} requests")
    if client_limited:
        out.append("client-limited: " + ", ".join(client_limited))
    return tuple(out)


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """httpx's own default verification (certifi's CA bundle), built once per process, not per client: loading
    the bundle costs about 25 ms of CPU, which every sweep paid again (most never speak TLS: the forward is
    plain HTTP)."""
    return httpx.create_ssl_context(trust_env=False)


class ServerClient:
    """Control-plane reads of one server (`/metrics`, `/server_info`, `/v1/models`, `/flush_cache`) over httpx."""

    def __init__(self, base_url: str, timeout_s: float = 5.0) -> None:
        """Prepare a client; the connection pool opens in `__aenter__`."""
        self.base_url = base_url.rstrip("/")
        self._timeout = httpx.Timeout(timeout_s)
        self._deadline_s = timeout_s
        """The whole exchange's limit: httpx's timeouts are per operation (one byte a second never trips its
        read timeout), so each request also runs under this one deadline, head and whole body."""
        self._client: httpx.AsyncClient | None = None

    async def __aenter__(self) -> ServerClient:
        self._client = httpx.AsyncClient(
            base_url=self.base_url, timeout=self._timeout, trust_env=False, verify=_tls_context()
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _request(self, method: str, path: str) -> tuple[int, str] | None:
        """(status, body text) or None: a body over `MAX_CONTROL_BODY_BYTES` fails this poll without being
        read further, bytes that are not UTF-8 are replaced, a redirect is not followed (httpx's default:
        it could lead to another origin), and the whole exchange ends within the client's `timeout_s`."""
        assert self._client is not None
        try:
            async with asyncio.timeout(self._deadline_s), self._client.stream(method, path) as resp:
                declared = resp.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > MAX_CONTROL_BODY_BYTES:
                    return None
                body = bytearray()
                async for block in resp.aiter_bytes():
                    body += block
                    if len(body) > MAX_CONTROL_BODY_BYTES:
                        return None
                return resp.status_code, body.decode("utf-8", errors="replace")
        except (httpx.HTTPError, OSError, ValueError, TimeoutError):
            return None

    async def _get(self, path: str) -> tuple[int, str] | None:
        return await self._request("GET", path)

    async def metrics(self) -> dict[str, float] | None:
        """`/metrics` parsed, or None when unavailable (SGLang without `--enable-metrics`)."""
        text = await self._metrics_text()
        return None if text is None else parse_prometheus(text)

    async def gauges(self) -> dict[str, float] | None:
        """A poll's read of `/metrics`: the gauges of `gauges.POLL_NAMES` only, or None when unavailable."""
        text = await self._metrics_text()
        return None if text is None else read_gauges(text)

    async def _metrics_text(self) -> str | None:
        got = await self._get("/metrics")
        return got[1] if got is not None and got[0] == 200 else None

    async def server_info(self) -> dict[str, Any] | None:
        """SGLang `/server_info` (or the older `/get_server_info`), or None; every string in it (keys too) with its
        control characters escaped (`safetext.escape_controls`): views, the store and exports get it from here."""
        for path in ("/server_info", "/get_server_info"):
            got = await self._get(path)
            if got is not None and got[0] == 200:
                try:
                    obj = json.loads(got[1])
                except (ValueError, RecursionError):
                    return None
                return escape_controls_in(obj) if isinstance(obj, dict) else None
        return None

    async def version(self) -> str | None:
        """vLLM's `/version` (`{"version": "0.32.0"}`), or None."""
        got = await self._get("/version")
        if got is None or got[0] != 200:
            return None
        try:
            obj = json.loads(got[1])
        except (ValueError, RecursionError):
            return None
        return escape_controls(str(obj["version"])) if isinstance(obj, dict) and "version" in obj else None

    async def models(self) -> dict[str, Any] | None:
        """`/v1/models` as JSON (control characters escaped, as `server_info`), or None."""
        got = await self._get("/v1/models")
        if got is None or got[0] != 200:
            return None
        try:
            obj = json.loads(got[1])
        except (ValueError, RecursionError):
            return None
        return escape_controls_in(obj) if isinstance(obj, dict) else None

    async def model_id(self) -> str | None:
        """The first model id of `/v1/models`, or None."""
        try:
            data = ((await self.models()) or {}).get("data") or []
            return str(data[0]["id"]) if data else None
        except (KeyError, TypeError, AttributeError, IndexError):
            return None

    async def flush_cache(self) -> bool:
        """POST SGLang `/flush_cache` (a 200 does not prove a flush: it is skipped while busy)."""
        got = await self._request("POST", "/flush_cache")
        return got is not None and got[0] == 200
