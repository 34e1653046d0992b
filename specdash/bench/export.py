"""Exports of stored runs: CSV (levels or samples) and JSON shaped like sglang.bench_serving's results.

JSON: one object per level with the keys `sglang.bench_serving` writes where the quantity is the same
(checked against its `benchmark()` result dict: `duration`, `completed`, `total_output_tokens`,
`request_throughput`, `output_throughput`, `mean|median|std|p99_{ttft,tpot,itl,e2e_latency}_ms`,
`concurrency`, `accept_length`, `max_concurrency`), plus specdash's own keys under the same object
(`mode`, `failed`, `failures`, `output_throughput_steady`, `p10`/`p90` percentiles, per-token ITL, the
server's view and warnings). Differences to know:

- `output_throughput` is total output tokens / level duration, as in bench_serving; the steady-state
  figure specdash plots is `output_throughput_steady`.
- `*_itl_ms` is per chunk (bench_serving's OpenAI-path definition; under speculation one chunk is one
  verify step); the per-token spread is `*_itl_token_ms`.
- `accept_length` is the server's figure when available, else the mean per-request `spec_accept_length`.
- Input-token fields (`total_input_tokens`, `input_throughput`) are absent: the probe does not tokenize.

CSV: a text cell that a spreadsheet would run as a formula (a server's error text `=HYPERLINK(...)`, a mode
named `@SUM(...)`) is written with a leading `'` (OWASP's CSV injection advice); numbers stay numbers.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from specdash.bench.store import Store
from specdash.errors import UsageError

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a spreadsheet read a cell as a formula (OWASP "CSV Injection")."""


_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def csv_cell(value: Any) -> Any:
    """`value` as a CSV cell that no spreadsheet runs: text starting with `FORMULA_STARTS` gets a leading `'`,
    unless it is a plain decimal number (`-3.5`, `+1e3`: a negative number is a number, not a formula)."""
    if not isinstance(value, str) or not value.startswith(FORMULA_STARTS) or _NUMBER.fullmatch(value):
        return value
    return "'" + value


class _CsvWriter:
    """`csv.writer` with every cell through `csv_cell`: the one way specdash writes CSV."""

    def __init__(self, buf: io.StringIO) -> None:
        self._writer = csv.writer(buf)

    def writerow(self, row: Iterable[Any]) -> None:
        self._writer.writerow([csv_cell(cell) for cell in row])


def _pct(d: Mapping[str, Any], key: str, name: str, out: dict[str, Any]) -> None:
    p = d.get(key) or {}
    out[f"mean_{name}_ms"] = p.get("mean")
    out[f"median_{name}_ms"] = p.get("p50")
    out[f"std_{name}_ms"] = p.get("std")
    out[f"p10_{name}_ms"] = p.get("p10")
    out[f"p90_{name}_ms"] = p.get("p90")
    out[f"p99_{name}_ms"] = p.get("p99")


def level_json(mode: str, result: Mapping[str, Any]) -> dict[str, Any]:
    """One stored level result -> a bench_serving-compatible dict (plus specdash's extras)."""
    stats = result.get("stats") or {}
    server = result.get("server") or {}
    out: dict[str, Any] = {
        "backend": "specdash",
        "mode": mode,
        "max_concurrency": result.get("concurrency"),
        "status": result.get("status"),
        "duration": stats.get("wall_s"),
        "completed": stats.get("completed"),
        "failed": stats.get("failed"),
        "failures": stats.get("failures"),
        "total_output_tokens": stats.get("total_output_tokens"),
        "request_throughput": stats.get("request_throughput"),
        "output_throughput": stats.get("output_tok_s_wall"),
        "output_throughput_steady": stats.get("output_tok_s"),
        "max_output_tokens_per_s": stats.get("peak_tok_s"),
        "concurrency": stats.get("achieved_concurrency"),
        "accept_length": server.get("accept_length") or stats.get("accept_length"),
        "tokens_per_chunk": stats.get("tokens_per_chunk"),
    }
    _pct(stats, "ttft_ms", "ttft", out)
    _pct(stats, "tpot_ms", "tpot", out)
    _pct(stats, "itl_chunk_ms", "itl", out)
    _pct(stats, "itl_token_ms", "itl_token", out)
    _pct(stats, "e2e_ms", "e2e_latency", out)
    prt = stats.get("per_request_tok_s") or {}
    out["per_request_tok_s_p10"] = prt.get("p10")
    out["per_request_tok_s_median"] = prt.get("p50")
    out["per_request_tok_s_p90"] = prt.get("p90")
    out["server_output_throughput"] = server.get("tok_s")
    out["server_output_throughput_source"] = server.get("tok_s_source")
    out["client_limited"] = result.get("client_limited")
    out["warnings"] = result.get("warnings")
    return out


def _run_or_fail(store: Store, run_id: int) -> str:
    run = store.run(run_id)
    if run is None:
        raise UsageError(f"no run {run_id} in {store.path}")
    return run.meta.mode


def export_json(store: Store, run_id: int) -> str:
    """A run as JSON: `{"run": {...}, "levels": [bench_serving-like dicts]}`."""
    mode = _run_or_fail(store, run_id)
    run = store.run(run_id)
    assert run is not None
    levels = [level_json(mode, lv.result) for lv in store.levels(run_id) if lv.result]
    meta = {
        "id": run.id,
        "created": run.created,
        "status": run.status,
        "host": run.meta.host,
        "mode": run.meta.mode,
        "engine": run.meta.engine,
        "engine_version": run.meta.engine_version,
        "prompt_set": run.meta.prompt_set,
        "prompt_hash": run.meta.prompt_hash,
        "endpoint": run.meta.endpoint,
        "output_len": run.meta.output_len,
    }
    return json.dumps({"run": meta, "levels": levels}, indent=2, default=str)


LEVEL_COLUMNS = (
    "mode",
    "max_concurrency",
    "status",
    "completed",
    "failed",
    "duration",
    "output_throughput_steady",
    "output_throughput",
    "server_output_throughput",
    "request_throughput",
    "per_request_tok_s_median",
    "median_ttft_ms",
    "p99_ttft_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "median_itl_ms",
    "median_itl_token_ms",
    "concurrency",
    "accept_length",
    "client_limited",
)


def export_csv(store: Store, run_id: int, samples: bool = False) -> str:
    """A run as CSV: one row per level, or with `samples=True` one row per request."""
    mode = _run_or_fail(store, run_id)
    buf = io.StringIO()
    w = _CsvWriter(buf)
    if samples:
        levels = {lv.id: lv.concurrency for lv in store.levels(run_id)}
        w.writerow(
            [
                "concurrency",
                "index",
                "prompt_index",
                "ok",
                "error",
                "detail",
                "output_tokens",
                "requested_tokens",
                "estimated",
                "ttft_ms",
                "tpot_ms",
                "e2e_ms",
                "chunks",
                "spec_accept_length",
            ]
        )
        for level_id, s in store.iter_level_samples(run_id):
            w.writerow(
                [
                    levels.get(level_id),
                    s.index,
                    s.prompt_index,
                    int(s.ok),
                    s.error or "",
                    s.detail,
                    s.output_tokens,
                    s.requested_tokens,
                    int(s.estimated),
                    s.ttft_ms,
                    s.tpot_ms,
                    s.e2e_ms,
                    len(s.chunk_tokens),
                    s.spec_accept_length,
                ]
            )
        return buf.getvalue()
    w.writerow(LEVEL_COLUMNS)
    for lv in store.levels(run_id):
        if lv.result:
            d = level_json(mode, lv.result)
            w.writerow([d.get(k) for k in LEVEL_COLUMNS])
    return buf.getvalue()
