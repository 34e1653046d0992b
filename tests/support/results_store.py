"""A store with two synthetic A/B runs (baseline and a speculative mode), for the results tests.

The samples are synthetic but go through the real path: `summarize` makes each level's stats, the store
keeps samples, levels and provenance exactly as a sweep would.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from specdash.bench.probe import ProbeSettings
from specdash.bench.prompts import load_prompts
from specdash.bench.provenance import build
from specdash.bench.samples import Failure, RequestSample
from specdash.bench.store import RunMeta, Store
from specdash.bench.summary import summarize

MS = 1_000_000

# (C, per-request TTFT ms, TPOT ms): the speculative mode decodes faster at low C and slower at high C.
BASE = [(1, 20.0, 14.0), (2, 22.0, 15.0), (5, 40.0, 19.0), (10, 60.0, 25.0), (20, 90.0, 36.0)]
SPEC = [(1, 20.0, 8.0), (2, 25.0, 11.0), (5, 45.0, 23.0), (10, 70.0, 35.0), (20, 100.0, 60.0)]


def _samples(
    c: int, ttft: float, tpot: float, tokens: int = 64, waves: int = 3, failed: int = 0
) -> list[RequestSample]:
    out = []
    e2e_ns = int((ttft + tpot * (tokens - 1)) * MS)
    for i in range(c * waves):
        start = (i // c) * e2e_ns
        first = start + int(ttft * MS)
        offsets = tuple(int((ttft + tpot * k) * 1000) for k in range(tokens))
        ok = i >= failed
        out.append(
            RequestSample(
                index=i, prompt_index=i, worker=0, error=None if ok else Failure(next(iter(Failure)).value),
                detail="", http_status=200 if ok else 500, scheduled_ns=start, start_ns=start,
                end_ns=start + e2e_ns, first_token_ns=first if ok else None,
                last_token_ns=start + e2e_ns if ok else None, output_tokens=tokens if ok else 0,
                requested_tokens=tokens, estimated=False, per_chunk_exact=True,
                chunk_offsets_us=offsets if ok else (), chunk_tokens=(1,) * tokens if ok else (),
            )
        )  # fmt: skip
    return out


def add_run(store: Store, mode: str, levels: list[tuple[int, float, float]], *, accept: float | None = None,
            output_len: int = 64, sweep_id: str = "s1", argv: tuple[str, ...] = ()) -> int:  # fmt: skip
    """One run of `mode` with a level per (C, TTFT, TPOT)."""
    prompts = load_prompts("chat")
    settings = ProbeSettings(output_len=output_len)
    spec = accept is not None
    provenance = build(
        prompts,
        settings,
        extra={
            "command": list(argv)
            or ["python", "-m", "sglang.launch_server", "--tp", "2"]
            + (["--speculative-algorithm", "EAGLE3"] if spec else []),
            "gpus": {"count": 2, "models": ["NVIDIA H100 80GB HBM3"], "driver": "550.54", "memory_mib": 81559},
            "sweep_id": sweep_id,
            "engine": "sglang",
            "engine_version": "0.5.5",
        },
    )
    run_id = store.create_run(
        RunMeta(
            host="gpu-box",
            mode=mode,
            engine="sglang",
            engine_version="0.5.5",
            server_args={"tp_size": 2, "speculative_algorithm": "EAGLE3" if spec else None},
            prompt_set=prompts.name,
            prompt_hash=prompts.sha256,
            endpoint="generate",
            output_len=output_len,
            provenance=provenance,
        )
    )
    for c, ttft, tpot in levels:
        level_id = store.start_level(run_id, c)
        samples = _samples(c, ttft, tpot, tokens=output_len, failed=1 if c == 20 else 0)
        for s in samples:
            store.add_sample(run_id, level_id, s)
        stats = summarize(samples, c)
        server: dict[str, object] = {"accept_length": accept}
        if accept is not None:
            server |= {"draft_share": 1 - 1 / accept, "accept_per_position": [0.8, 0.5, 0.3][: int(accept)]}
        result = {"stats": dataclasses.asdict(stats), "server": server, "warnings": []}
        store.finish_level(level_id, "done", result, None)
    store.finish_run(run_id, "done")
    return run_id


def make_store(path: Path) -> tuple[int, int]:
    """The A/B pair: (baseline run id, eagle3 run id)."""
    with Store(path) as store:
        return add_run(store, "baseline", BASE), add_run(store, "eagle3", SPEC, accept=2.6)
