"""Resident modes, the pure part: whether two servers fit (the memory plan), whether a sleeping server has
released its GPU memory, whether a woken one still answers as measured, and the one line a switch reports.

The I/O (HTTP calls, `nvidia-smi`, the host's records) is `server.resident`'s; every rule it applies is here,
with its numbers, so that a refusal or a fallback always says what was measured against what.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

RELEASED_SHARE = 0.2
"""A GPU counts as released when it holds at most this share of what it held awake (or `RELEASED_FLOOR_MIB`)."""
RELEASED_FLOOR_MIB = 2048.0
"""... or at most this much: a sleeping server keeps its CUDA context, NCCL buffers and allocator pools."""
ACCEPT_TOLERANCE = 0.25
"""A woken speculative mode's mean accept length may differ from the figure measured before its sleep by
this share (greedy requests of one prompt set; a lost drafter drops it to about 1.0)."""
ACCEPT_FLOOR = 0.2
"""... or by this much absolutely, whichever is larger (short outputs make the mean coarse)."""
HOST_RAM_MARGIN = 0.9
"""A level-1 sleep may fill at most this share of the host's available RAM with weights."""


@dataclass(frozen=True)
class Released:
    """Whether a sleep released the memory, GPU by GPU, with the evidence."""

    ok: bool
    evidence: str
    """`GPU0 45144 -> 568 MiB, GPU1 ...` (what each GPU held awake and now)."""


def released(before: Mapping[int, float], now: Mapping[int, float]) -> Released:
    """Each GPU that held memory awake (more than the floor) now holds at most the released share or floor."""
    parts, ok = [], True
    for index in sorted(before):
        was, held = before[index], now.get(index, before[index])
        if was <= RELEASED_FLOOR_MIB:
            continue  # a GPU this server did not use
        limit = max(RELEASED_FLOOR_MIB, RELEASED_SHARE * was)
        ok = ok and held <= limit
        parts.append(f"GPU{index} {was:.0f} -> {held:.0f} MiB")
    return Released(ok, ", ".join(parts) or "no GPU held more than the floor")


@dataclass(frozen=True)
class AcceptCheck:
    """A woken speculative mode's accept length against the figure measured before its sleep."""

    ok: bool
    before: float
    after: float

    @property
    def text(self) -> str:
        tol = max(ACCEPT_FLOOR, ACCEPT_TOLERANCE * self.before)
        return f"accept length {self.after:.2f} (before sleep {self.before:.2f}, tolerance +-{tol:.2f})"


def check_accept(before: float, after: float) -> AcceptCheck:
    """`after` within the tolerance of `before`."""
    return AcceptCheck(abs(after - before) <= max(ACCEPT_FLOOR, ACCEPT_TOLERANCE * before), before, after)


def mean(values: Sequence[float]) -> float | None:
    """The mean, or None for no values."""
    return sum(values) / len(values) if values else None


# ------------------------------------------------------------------------------------------ memory plan


@dataclass(frozen=True)
class ServerNeed:
    """What one server needs per GPU, awake and asleep, and in host RAM while asleep."""

    mode: str
    awake_mib: float
    """Per GPU it uses, awake."""
    asleep_mib: float
    """Per GPU, asleep (measured after its first sleep, else the engine's estimate)."""
    host_ram_mib: float
    """Host RAM its level-1 sleep fills with weights (all GPUs together)."""
    measured: bool = False
    """True when `asleep_mib` was measured, not estimated."""


@dataclass(frozen=True)
class MemoryPlan:
    """Whether the servers fit: at most one awake, the others asleep, on the same GPUs."""

    fits: bool
    lines: tuple[str, ...] = field(default_factory=tuple)
    """The numbers, one line each; the first says whether it fits."""


def plan_memory(servers: Sequence[ServerNeed], gpu_total_mib: float, host_available_mib: float | None) -> MemoryPlan:
    """The worst case: the largest awake need beside every other server asleep, on each GPU; and all the
    sleeping servers' weights in host RAM at once (the one awake server's weights are on the GPUs)."""
    if not servers:
        return MemoryPlan(True, ("no resident servers",))
    lines: list[str] = []
    fits = True
    for awake in servers:
        others = [s for s in servers if s is not awake]
        need = awake.awake_mib + sum(s.asleep_mib for s in others)
        ok = need <= gpu_total_mib
        fits = fits and ok
        held = " + ".join(
            f"{s.mode} asleep {s.asleep_mib / 1024:.1f} GiB{'' if s.measured else ' (est.)'}" for s in others
        )
        lines.append(
            f"{awake.mode} awake {awake.awake_mib / 1024:.1f} GiB"
            + (f" + {held}" if held else "")
            + f" = {need / 1024:.1f} of {gpu_total_mib / 1024:.1f} GiB per GPU: {'fits' if ok else 'does not fit'}"
        )
    if host_available_mib is not None:
        ram = sum(s.host_ram_mib for s in servers) - min(s.host_ram_mib for s in servers)
        ok = ram <= HOST_RAM_MARGIN * host_available_mib
        fits = fits and ok
        lines.append(
            f"host RAM for sleeping weights {ram / 1024:.1f} GiB of {host_available_mib / 1024:.1f} GiB available "
            f"(at most {HOST_RAM_MARGIN:.0%}): {'fits' if ok else 'does not fit'}"
        )
    head = "memory plan: the resident servers fit" if fits else "memory plan: the resident servers do not fit"
    return MemoryPlan(fits, (head, *lines))


_SGL_WEIGHTS = re.compile(r"Load weight end\..*?mem usage=([\d.]+) GB")
_VLLM_WEIGHTS = re.compile(r"Model loading took ([\d.]+) (GiB|GB)")
_RANK = re.compile(r"\b(TP\d+|Worker_TP\d+|rank=?\d+)\b")


def weights_mib(log: str) -> float | None:
    """The weights' size over all ranks from a start's log (SGLang's `Load weight end ... mem usage=`, once for
    the target and once for a draft model per rank; vLLM's `Model loading took`), or None when it does not say."""
    per_rank: dict[str, float] = {}
    for line in log.splitlines():
        m = _SGL_WEIGHTS.search(line) or _VLLM_WEIGHTS.search(line)
        if m is None:
            continue
        rank = _RANK.search(line)
        gb = float(m.group(1))
        key = rank.group(1) if rank else "0"
        per_rank[key] = per_rank.get(key, 0.0) + gb * 1024  # target and draft weights add up; torch's GB are GiB
    return sum(per_rank.values()) if per_rank else None


# ------------------------------------------------------------------------------------------ the report


def duration_text(seconds: float) -> str:
    """`6.2 s`, `9m 10s`, `1h 02m`."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


@dataclass(frozen=True)
class SwitchOutcome:
    """How a switch to a mode went."""

    mode: str
    resident: bool
    """True: woken and verified; False: (re)started."""
    seconds: float
    """From the switch's start to live (woken and verified) or to the restart's launch."""
    identical: int = 0
    total: int = 0
    accept: float | None = None
    restart_s: float | None = None
    """What a restart to ready took here last (from the store), for the comparison."""
    why_restart: str = ""
    """Why a resident switch fell back to a restart: one line with the evidence."""
    notes: tuple[str, ...] = ()
    """What else happened on the way (the old server could not sleep and was stopped...)."""
    steps: tuple[tuple[str, float], ...] = ()
    """Where the seconds went: (`sleep A`, s), (`check room`, s), (`wake`, s), (`verify`, s)."""

    @property
    def steps_text(self) -> str:
        """`sleep baseline 1.2 s, check room 0.3 s, wake 0.4 s, verify 3.9 s`."""
        return ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.steps)

    @property
    def text(self) -> str:
        """`switched in 6.2 s (verified 8/8 identical, accept length 2.1); a restart takes 9m 10s here`."""
        restart = f"; a restart takes {duration_text(self.restart_s)} here" if self.restart_s else ""
        if self.resident:
            checks = f"verified {self.identical}/{self.total} identical"
            if self.accept is not None:
                checks += f", accept length {self.accept:.1f}"
            return f"switched to {self.mode} in {duration_text(self.seconds)} ({checks}){restart}"
        if self.why_restart:
            return f"restarting {self.mode}: {self.why_restart}"
        return f"starting {self.mode}{restart}"
