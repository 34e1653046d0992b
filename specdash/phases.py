"""Plain data shared across specdash: server phases and the events the startup tracker emits."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Phase(enum.StrEnum):
    """Where a server is in its life. Startup phases are listed in the order they happen."""

    STOPPED = "stopped"
    LAUNCHING = "launching"
    DIST_INIT = "dist-init"
    LOADING_WEIGHTS = "loading weights"
    ALLOCATING_KV = "allocating KV cache"
    CAPTURING_GRAPHS = "capturing CUDA graphs"
    LOADING_DRAFT = "loading draft model"
    CAPTURING_DRAFT_GRAPHS = "capturing draft graphs"
    WARMING_UP = "warming up"
    READY = "ready"
    STOPPING = "stopping"
    CRASHED = "crashed"
    EXITED = "exited"

    @property
    def is_startup(self) -> bool:
        """True for the phases between launch and ready."""
        return self in STARTUP_ORDER and self not in (Phase.READY,)

    @property
    def is_terminal(self) -> bool:
        """True once the server is gone (or never ran)."""
        return self in (Phase.STOPPED, Phase.CRASHED, Phase.EXITED)

    @property
    def is_settled(self) -> bool:
        """True where a start has come to rest: ready, or gone (what a caller waits for after start or adopt)."""
        return self is Phase.READY or self.is_terminal


class Origin(enum.StrEnum):
    """How specdash came to watch a server: only a start it watched from launch teaches the ETA."""

    UNKNOWN = "unknown"
    """Not looked yet (before the first connect)."""
    NONE = "none"
    """Looked: no server of ours on the host."""
    LAUNCHED = "launched"
    """Specdash launched it and watched it from the launch."""
    ATTACHED = "attached"
    """Found running from its run record (launched by a specdash earlier), watched from then on."""
    ADOPTED = "adopted"
    """Started by hand, outside specdash; adopted from its process."""


STARTUP_ORDER: tuple[Phase, ...] = (
    Phase.LAUNCHING,
    Phase.DIST_INIT,
    Phase.LOADING_WEIGHTS,
    Phase.ALLOCATING_KV,
    Phase.CAPTURING_GRAPHS,
    Phase.LOADING_DRAFT,
    Phase.CAPTURING_DRAFT_GRAPHS,
    Phase.WARMING_UP,
    Phase.READY,
)
"""The startup phases in order; a tracker never moves backwards along it."""

SETTLED: frozenset[Phase] = frozenset(phase for phase in Phase if phase.is_settled)
"""The phases `Phase.is_settled` names, for `RemoteSession.wait_status`."""


@dataclass(frozen=True)
class Progress:
    """Progress inside one phase: `done` of `total` units (shards, graph batch sizes)."""

    done: int
    total: int
    unit: str = ""

    @property
    def fraction(self) -> float:
        """`done / total`, clamped to [0, 1]; 0 when the total is unknown."""
        return 0.0 if self.total <= 0 else max(0.0, min(1.0, self.done / self.total))


@dataclass(frozen=True)
class CrashInfo:
    """Why a server died: the exception line first, then the surrounding excerpt."""

    reason: str
    excerpt: tuple[str, ...] = field(default_factory=tuple)
