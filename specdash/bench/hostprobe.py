"""What the sweep needs of a probe that runs on the server's host (the runner itself is `server.probe_agent`).

The sweep sits below the SSH layer, so it knows the host probe only by this interface; the server layer, which
holds the SSH connection, makes the runner and hands the sweep a factory for it.
"""

from __future__ import annotations

from typing import Protocol

from specdash.bench.probe import LevelOutcome, LevelPlan
from specdash.bench.workers import LevelSink


class AgentUnavailable(Exception):
    """The host cannot run the agent (no Python, too old, upload refused, link error): one line saying why."""


class HostProbe(Protocol):
    """A probe on the host: the local runners' interface plus `prepare` and the last failure's reason."""

    last_failure: str | None
    link_wait_s: float
    """How long a level waits for a lost link before it fails (set by the sweep from its policy); the agent
    measures on meanwhile and its records are resumed after the last one stored."""
    metrics_poll_s: float
    """The agent reads the server's gauges (`gauges.POLL_NAMES`) this often during a level and hands them to the
    level's `gauges` (0: not; the sweep sets it per level, so no poll crosses the link)."""
    ran_on: dict[str, str]
    """Where the last level's agent said it ran (`host`, and inside a Slurm step `node`, `job`, `step`)."""

    async def prepare(self) -> str:
        """Get the host ready; the host's Python version. Raises `AgentUnavailable`."""

    async def run_level(self, plans: list[LevelPlan], sink: LevelSink) -> list[LevelOutcome | None]:
        """Run one level's plans on the host."""

    def abort(self, reason: str) -> None:
        """End the level in flight."""

    async def close(self) -> None:
        """End the agent and clean up."""
