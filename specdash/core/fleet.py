"""The fleet view's rows, Textual-free: one `HostRow` per host (or Slurm job), folded from its session's events.

`HostRow.apply` takes every event a session emits (connection events included) and keeps only what a row shows:
engine, mode, state and startup stage with its progress, ranks ready, the server's own tok/s and running
requests, GPU utilisation and memory, and the newest alert (a crash, a stuck phase, a lost link, acceptance
collapsing toward 1.0). It holds no history: an idle host costs one small object.
"""

from __future__ import annotations

from dataclasses import dataclass

from specdash.core.events import GpuStats, Notice, ServerLoad, ServerStatus
from specdash.phases import Phase

ACCEPT_COLLAPSE = 1.2
"""A speculative mode whose acceptance length falls below this (tokens per step) gains almost nothing."""


@dataclass
class HostRow:
    """One host's line in the fleet view."""

    label: str
    link: str = "connecting"
    """`connecting`, `connected`, `reconnecting`, `lost`, `failed`."""
    status: ServerStatus | None = None
    tok_s: float | None = None
    running: int | None = None
    accept_len: float | None = None
    gpu_util: float | None = None
    """Mean utilisation of the host's GPUs, percent."""
    gpu_mem: tuple[float, float] | None = None
    """(used, total) MiB over all GPUs."""
    alert: str = ""
    """The newest alert, in a few words."""
    alert_level: str = ""
    """`error` or `warning` (empty: none)."""
    changes: int = 0
    """Bumped on every change that shows (viewers redraw when it moves)."""

    def apply(self, event: object) -> bool:
        """Fold one session event in; True when the row changed."""
        before = self.changes
        name = type(event).__name__
        if isinstance(event, ServerStatus):
            self._status(event)
        elif isinstance(event, ServerLoad):
            self.tok_s, self.running, self.accept_len = event.tok_s, event.running, event.accept_len
            if event.accept_len is not None and event.accept_len < ACCEPT_COLLAPSE and self._speculative():
                self._alert(f"acceptance {event.accept_len:.2f}: collapsing toward 1.0", "warning")
            self.changes += 1
        elif isinstance(event, GpuStats):
            if event.gpus:
                self.gpu_util = sum(g.util_pct for g in event.gpus) / len(event.gpus)
                self.gpu_mem = (sum(g.mem_used_mib for g in event.gpus), sum(g.mem_total_mib for g in event.gpus))
                self.changes += 1
        elif isinstance(event, Notice):
            if event.severity in ("error", "warning"):
                self._alert(event.text, event.severity)
        elif name in ("Connected", "Reconnecting", "Lost", "Failed"):
            self.link = {"Connected": "connected", "Reconnecting": "reconnecting", "Lost": "lost"}.get(name, "failed")
            if name in ("Lost", "Failed"):
                why = getattr(event, "reason", "") or getattr(getattr(event, "error", None), "message", "")
                self._alert(f"link {self.link}: {why}".rstrip(": "), "error" if name == "Failed" else "warning")
            self.changes += 1
        return self.changes != before

    def _speculative(self) -> bool:
        command = self.status.command if self.status is not None else ()
        return any(arg.startswith("--speculative") or arg == "--speculative-config" for arg in command)

    def _status(self, status: ServerStatus) -> None:
        old = self.status
        self.status = status
        if status.phase is Phase.CRASHED and status.crash is not None:
            self._alert(f"crashed: {status.crash.reason}", "error")
        if status.phase is not Phase.READY:
            self.tok_s = self.running = None
        if old != status:
            self.changes += 1

    def _alert(self, text: str, level: str) -> None:
        self.alert, self.alert_level = " ".join(text.split())[:200], level
        self.changes += 1

    # -- what the columns show ---------------------------------------------------------------------------

    @property
    def engine(self) -> str:
        return self.status.engine if self.status is not None and self.status.engine else "-"

    @property
    def mode(self) -> str:
        return self.status.mode if self.status is not None and self.status.mode else "-"

    @property
    def state(self) -> str:
        """`ready`, `queued`, `loading weights 3/8 shards`, `crashed`...; the link first when it is down."""
        if self.link in ("failed", "lost", "reconnecting", "connecting"):
            return self.link
        status = self.status
        if status is None:
            return "-"
        if status.queued:
            return "queued"
        text = status.phase.value
        progress = status.progress
        if status.phase.is_startup and progress is not None and progress.total:
            text += f" {progress.done}/{progress.total}"
        return text

    @property
    def ranks(self) -> str:
        ranks = self.status.ranks if self.status is not None else None
        return f"{ranks[0]}/{ranks[1]}" if ranks else "-"

    @property
    def load(self) -> str:
        if self.tok_s is None:
            return "-"
        return f"{self.tok_s:,.0f}"

    @property
    def gpu(self) -> str:
        if self.gpu_util is None or self.gpu_mem is None:
            return "-"
        used, total = self.gpu_mem
        return f"{self.gpu_util:.0f}% {used / 1024:.0f}/{total / 1024:.0f}G"
