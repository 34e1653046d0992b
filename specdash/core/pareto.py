"""The throughput-interactivity trade-off: total tok/s against tok/s per user, and its Pareto frontier (pure).

Each measured level of a mode is one point: x = tok/s per user = 1000 / TPOT (the level's TPOT p50, or p90 for a
pessimistic view), y = aggregate output tok/s (also per GPU, divided by the mode's TP x DP). Higher is better on
both axes. A point is on the frontier when no other point (of any mode) is at least as good on both axes and
better on one (`frontier`). Drawn as a step function (`staircase`): for a required per-user rate x, the best
total any measured configuration delivered at x or faster — the shape `vllm bench sweep plot_pareto` draws.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ParetoPoint:
    """One (mode, level)."""

    mode: str
    """The mode."""
    concurrency: int
    """Nominal C (the point's label)."""
    total_tok_s: float
    """Aggregate output tok/s."""
    per_user_tok_s: float
    """1000 / TPOT (ms) at the chosen percentile."""
    gpus: int = 1
    """GPUs the mode uses (TP x DP)."""

    @property
    def per_gpu_tok_s(self) -> float:
        """total / GPUs."""
        return self.total_tok_s / max(1, self.gpus)


def per_user_tok_s(tpot_ms: float | None) -> float | None:
    """1000 / TPOT; None for a missing or non-positive TPOT."""
    if tpot_ms is None or tpot_ms <= 0:
        return None
    return 1000.0 / tpot_ms


_TP_KEYS = ("tp_size", "tp", "tensor_parallel_size")
_DP_KEYS = ("dp_size", "dp", "data_parallel_size")
_TP_FLAGS = ("--tp", "--tp-size", "--tensor-parallel-size", "-tp")
_DP_FLAGS = ("--dp", "--dp-size", "--data-parallel-size", "-dp")


def _flag(argv: Sequence[str], flags: tuple[str, ...]) -> int | None:
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name in flags:
            text = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            if text.isdigit() and int(text) > 0:
                return int(text)
    return None


def _key(args: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    for k in keys:
        v = args.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
        if isinstance(v, str) and v.isdigit() and int(v) > 0:
            return int(v)
    return None


def gpu_count(server_args: Mapping[str, Any] | None = None, argv: Sequence[str] = ()) -> int:
    """TP x DP from the server's arguments (SGLang `/server_info`, vLLM names) or the launch command; 1 if unknown."""
    args = server_args or {}
    tp = _key(args, _TP_KEYS) or _flag(argv, _TP_FLAGS) or 1
    dp = _key(args, _DP_KEYS) or _flag(argv, _DP_FLAGS) or 1
    return tp * dp


def points_for(mode: str, levels: Iterable[tuple[int, float, float | None]], gpus: int = 1) -> list[ParetoPoint]:
    """Points from (C, total tok/s, TPOT ms) triples; levels without a TPOT are left out."""
    out = []
    for c, total, tpot in levels:
        user = per_user_tok_s(tpot)
        if user is not None:
            out.append(ParetoPoint(mode, c, float(total), user, gpus))
    return sorted(out, key=lambda p: p.concurrency)


def _y(p: ParetoPoint, per_gpu: bool) -> float:
    return p.per_gpu_tok_s if per_gpu else p.total_tok_s


def frontier(points: Iterable[ParetoPoint], *, per_gpu: bool = False) -> list[ParetoPoint]:
    """The non-dominated points, by per-user rate ascending (so total descending)."""
    pts = list(points)
    out = []
    for p in pts:
        px, py = p.per_user_tok_s, _y(p, per_gpu)
        dominated = any(
            q.per_user_tok_s >= px and _y(q, per_gpu) >= py and (q.per_user_tok_s > px or _y(q, per_gpu) > py)
            for q in pts
        )
        if not dominated:
            out.append(p)
    out.sort(key=lambda p: (p.per_user_tok_s, -_y(p, per_gpu)))
    # Equal points (same x and y) are one frontier step.
    unique: list[ParetoPoint] = []
    for p in out:
        if not unique or (unique[-1].per_user_tok_s, _y(unique[-1], per_gpu)) != (p.per_user_tok_s, _y(p, per_gpu)):
            unique.append(p)
    return unique


def staircase(front: Sequence[ParetoPoint], *, per_gpu: bool = False) -> list[tuple[float, float]]:
    """The frontier as a step function's corners, from x = 0 to the fastest point and down to y = 0.

    For x in (x_{i-1}, x_i] the best total is y_i (the best of the points at least that fast).
    """
    corners: list[tuple[float, float]] = []
    prev_x = 0.0
    for p in front:
        y = _y(p, per_gpu)
        corners.append((prev_x, y))
        corners.append((p.per_user_tok_s, y))
        prev_x = p.per_user_tok_s
    if corners:
        corners.append((prev_x, 0.0))
    return corners
