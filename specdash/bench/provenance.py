"""Where a run's figures come from, stored with every run (`RunMeta.provenance`), and the workload's fingerprint.

| key | what |
|---|---|
| `command` | the mode's full launch command (argv), secrets redacted by the store |
| `command_source` | `bench --url`: where `command` was read (`/proc/PID/cmdline`), or `unknown (...: why)` |
| `engine`, `engine_version` | as identified from the server |
| `gpus` | `{count, models, driver, memory_mib}` from `nvidia-smi` on the host, when present |
| `specdash` | specdash's version |
| `workload` | prompt set (name, hash, count, prompt lengths), endpoint, output length, sampling, load |
| `fingerprint` | a hash of what makes two workloads comparable (`workload_fingerprint`) |
| `sweep_id` | shared by the modes of one A/B sweep |
| `slo` | the SLO the sweep was judged against, if any |

Two runs are like for like when their fingerprints match: same prompts in the same order, endpoint, output
length, EOS handling and sampling. The load (request count or duration) is not part of it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from specdash import __version__
from specdash.bench.probe import ProbeSettings
from specdash.bench.prompts import PromptSet
from specdash.safetext import escape_controls

GPU_QUERY = "nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader,nounits"
"""The inventory query (one row per GPU)."""

SAMPLING = {"temperature": 0}
"""The probe's sampling parameters (greedy: the same text in every mode, request_body)."""


def parse_gpu_inventory(text: str) -> dict[str, Any] | None:
    """Rows of `GPU_QUERY` -> `{count, models, driver, memory_mib}`; None when no row parses."""
    rows = []
    for line in text.splitlines():
        cells = [escape_controls(c.strip()) for c in line.split(",")]  # GPU names and driver: the host's text
        if len(cells) != 3 or not cells[0]:
            continue
        try:
            mem = float(cells[2])
        except ValueError:
            mem = None
        rows.append((cells[0], cells[1], mem))
    if not rows:
        return None
    return {
        "count": len(rows),
        "models": sorted({r[0] for r in rows}),
        "driver": rows[0][1],
        "memory_mib": rows[0][2],
    }


def workload(prompts: PromptSet, settings: ProbeSettings, load: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The workload of a run: what every request looks like, and how much load (see the module docstring)."""
    lengths = [len(p) for p in prompts.prompts]
    return {
        "prompt_set": prompts.name,
        "prompt_hash": prompts.sha256,
        "prompts": len(lengths),
        "prompt_chars": {"min": min(lengths), "mean": round(sum(lengths) / len(lengths), 1), "max": max(lengths)},
        "endpoint": settings.endpoint.value,
        "output_len": settings.output_len,
        "ignore_eos": settings.ignore_eos,
        "sampling": dict(SAMPLING),
        "load": dict(load or {}),
    }


def workload_fingerprint(w: Mapping[str, Any]) -> str:
    """16 hex digits over the comparable part of a `workload` dict (not the load)."""
    key = {k: w.get(k) for k in ("prompt_hash", "endpoint", "output_len", "ignore_eos", "sampling")}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def build(
    prompts: PromptSet,
    settings: ProbeSettings,
    *,
    load: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A run's provenance: the workload and its fingerprint, specdash's version, and `extra` from the caller
    (command, GPUs, sweep id, SLO)."""
    w = workload(prompts, settings, load)
    out: dict[str, Any] = {"specdash": __version__, "workload": w, "fingerprint": workload_fingerprint(w)}
    out.update({k: v for k, v in (extra or {}).items() if v not in (None, "", (), [])})
    return out


def differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """What differs between two runs' workloads (`workload` dicts), as `key: A vs B`; empty when like for like."""
    out = []
    for k in ("prompt_set", "prompt_hash", "endpoint", "output_len", "ignore_eos", "sampling"):
        if a.get(k) != b.get(k):
            va, vb = a.get(k), b.get(k)
            if k == "prompt_hash":
                va, vb = str(va)[:12], str(vb)[:12]
            out.append(f"{k}: {va} vs {vb}")
    return out
