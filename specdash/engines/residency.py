"""How an engine keeps a server resident: the launch flags that make it able to sleep, and the HTTP calls
that put it to sleep, wake it and ask whether it sleeps. Plain data; each engine module sets its own
`EngineRules.residency` (None: the engine cannot sleep), and `refusal` says why a mode cannot be resident.

What each version does (checked in the engines' own source and docs; `docs/resident.md` has the table):

- vLLM: `--enable-sleep-mode` at launch; the HTTP endpoints `POST /sleep?level=N`, `POST /wake_up`,
  `GET /is_sleeping` exist only with `VLLM_SERVER_DEV_MODE=1` (404 without it). Sleep mode runs on the CUDA
  platform only: other builds (the CPU build) refuse `--enable-sleep-mode` when the engine is configured.
  `/health` answers 200 while the server sleeps: only `/is_sleeping` tells. Level 2 discards the weights
  (the drafter's too: acceptance drops to 0 after a wake); level 1 keeps a copy in host RAM.
- SGLang: `--enable-memory-saver` (torch_memory_saver) plus `--enable-weights-cpu-backup` (and
  `--enable-draft-weights-cpu-backup` with a draft model) so the weights survive a release;
  `POST /release_memory_occupation` and `POST /resume_memory_occupation` with optional `tags`
  (`weights`, `kv_cache`, `cuda_graph`). The routes exist without the flags, but then nothing is released
  (the adapter is a no-op): the answer is 200 and the memory stays, which only `nvidia-smi` shows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class HttpCall:
    """One control-plane request: method, path (with its query), and a JSON body when it takes one."""

    method: str
    path: str
    body: Mapping[str, object] | None = None


@dataclass(frozen=True)
class Residency:
    """What an engine needs to sleep and wake a server instead of restarting it."""

    flags: tuple[str, ...]
    """Launch flags that enable sleeping (added to a resident mode's arguments unless already there)."""
    draft_flags: tuple[str, ...] = ()
    """Flags added as well when the mode has a draft model (SGLang's draft weights backup)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Launch environment the endpoints need (vLLM's `VLLM_SERVER_DEV_MODE=1`)."""
    sleep: HttpCall = HttpCall("POST", "/sleep")
    """Puts the server to sleep, memory released (weights kept in host RAM)."""
    wake: HttpCall = HttpCall("POST", "/wake_up")
    """Wakes it: weights back on the GPUs, KV cache and graphs re-allocated."""
    is_sleeping: str | None = None
    """A GET answering `{"is_sleeping": bool}`, where the engine has one (health stays 200 while asleep)."""
    spec_markers: tuple[str, ...] = ()
    """Launch arguments that make a mode speculative (it then has a drafter whose weights must survive)."""
    draft_markers: tuple[str, ...] = ()
    """Launch arguments that name a separate draft model."""
    refused_lines: tuple[str, ...] = ()
    """What the engine prints when it refuses the sleep flags at launch on this host (vLLM's CPU build and
    other platforms without sleep mode): the mode is then restarted as a plain server."""
    holds_fraction: float = 0.03
    """What a sleeping server still holds, as a share of its awake memory, until measured (CUDA context,
    allocator pools, NCCL buffers: about 1.3 GB of 42 GB on the lent H100 with vLLM 0.24.0)."""


def is_speculative(residency: Residency, args: Sequence[str]) -> bool:
    """True when the launch arguments turn speculation on."""
    return any(a.split("=", 1)[0] in residency.spec_markers for a in args)


def has_draft_model(residency: Residency, args: Sequence[str]) -> bool:
    """True when the launch arguments name a separate draft model."""
    return any(a.split("=", 1)[0] in residency.draft_markers for a in args) or any(
        "model" in a and a.startswith("{") for a in args
    )


def resident_args(residency: Residency, args: Sequence[str]) -> tuple[str, ...]:
    """`args` with the residency flags added (those already given are not repeated)."""
    wanted = list(residency.flags) + (list(residency.draft_flags) if has_draft_model(residency, args) else [])
    given = {a.split("=", 1)[0] for a in args}
    return (*args, *(f for f in wanted if f not in given))


def refusal(engine: str, residency: Residency | None, args: Sequence[str], level: int) -> str | None:
    """Why a mode of `engine` with these arguments cannot be resident at sleep `level`, or None."""
    if residency is None:
        return f"{engine} has no sleep/wake endpoints specdash knows, so its servers cannot stay resident"
    if level not in (1, 2):
        return f"sleep level {level} does not exist (1: weights kept in host RAM; 2: weights discarded)"
    if level == 2 and is_speculative(residency, args):
        return (
            "sleep level 2 discards the draft model's weights too (acceptance drops to 0 after a wake, and with "
            "EAGLE-3 and CUDA graphs vLLM has crashed after waking): a speculative mode sleeps at level 1"
        )
    return None
