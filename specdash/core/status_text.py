"""One server state for every display: everything a viewer says about the server, derived from one snapshot.

The dashboard's mode list, server panel and header, its dialogs, the headless progress lines and what
the store records about a start are all functions of one `ServerStatus` here, so they cannot disagree
(a mode list saying "running" next to a panel saying "CRASHED" was the bug this module ends).

Pure text and decisions, no I/O, no Textual.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from specdash.core.events import ServerStatus
from specdash.phases import Origin, Phase

StateKey = Literal["unknown", "starting", "ready", "stopping", "stopped", "crashed"]


@dataclass(frozen=True)
class Look:
    """How one state looks, wherever it is shown."""

    key: StateKey
    """The state family (the UI's CSS class is `-<key>`)."""
    icon: str
    """One character."""
    word: str
    """The state in words (`ready`, `loading weights`, `crashed`)."""


ICONS: dict[StateKey, str] = {
    "unknown": "○",
    "starting": "◐",
    "ready": "●",
    "stopping": "◑",
    "stopped": "○",
    "crashed": "✖",
}
"""The icon of each state family."""

RECORD_KINDS: dict[Origin, str] = {
    Origin.LAUNCHED: "startup",
    Origin.ATTACHED: "attach",
    Origin.ADOPTED: "adoption",
}
"""What the store records when a server is seen ready, by how specdash came to watch it. Only a
`startup` (watched from launch to ready) carries phase durations that the ETA may learn from."""


def duration(seconds: float | None) -> str:
    """`42s`, `3m 05s`, `1h 02m`, `3d 04h`; `-` when unknown."""
    if seconds is None or math.isnan(seconds):
        return "-"
    total = max(0, int(seconds + 0.5))
    if total < 60:
        return f"{total}s"
    minutes, secs = divmod(total, 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours:02d}h"


def state_key(phase: Phase, origin: Origin = Origin.LAUNCHED) -> StateKey:
    """The state family of a phase (EXITED, a server gone without a crash reason, reads as stopped)."""
    if origin is Origin.UNKNOWN:
        return "unknown"
    if phase is Phase.READY:
        return "ready"
    if phase is Phase.CRASHED:
        return "crashed"
    if phase is Phase.STOPPING:
        return "stopping"
    if phase.is_startup:
        return "starting"
    return "stopped"


def look(status: ServerStatus) -> Look:
    """How `status` looks."""
    key = state_key(status.phase, status.origin)
    word = "unknown" if key == "unknown" else status.phase.value
    return Look(key, ICONS[key], word)


def is_live(status: ServerStatus) -> bool:
    """True while the server runs or starts (not stopping, not gone, not unknown)."""
    return look(status).key in ("starting", "ready")


def origin_text(status: ServerStatus) -> str:
    """`attached`, `adopted`, or '' for a server specdash launched (the usual case says nothing)."""
    return status.origin.value if status.origin in (Origin.ATTACHED, Origin.ADOPTED) else ""


def title(status: ServerStatus, *, stale: bool = False) -> str:
    """The server panel's first line: `● READY`, `◐ LOADING WEIGHTS · attached`, `✖ CRASHED`."""
    shown = look(status)
    parts = [f"{shown.icon} {shown.word.upper()}"]
    if origin := origin_text(status):
        parts.append(origin)
    text = " · ".join(parts)
    return text + ("  (last known: no connection)" if stale else "")


def badge(status: ServerStatus | None, *, stale: bool = False) -> tuple[str, StateKey]:
    """The header's server badge (`server: ready`) and its state family."""
    if status is None:
        return "server: unknown", "unknown"
    shown = look(status)
    return f"server: {shown.word}{' (last known)' if stale else ''}", shown.key


def facts(status: ServerStatus, now: float) -> str:
    """The panel's second line: `baseline · pid 123 · port 30000 · up 5m 02s`."""
    parts = []
    if status.mode:
        parts.append(status.mode)
    if status.pid is not None:
        parts.append(f"pid {status.pid}")
    if status.job_id:
        parts.append(f"job {status.job_id}")
    if status.port is not None:
        parts.append(f"port {status.port}")
    if status.phase is Phase.READY and status.started_at is not None:
        parts.append(f"up {duration(now - status.started_at)}")
    if parts:
        return " · ".join(parts)
    return "not looked yet" if status.origin is Origin.UNKNOWN else "no server of ours on this host"


def mode_marker(status: ServerStatus, mode: str) -> str:
    """What the mode list shows beside `mode`: the server's state when it is that mode's, else ''."""
    if not status.mode or status.mode != mode or status.origin in (Origin.UNKNOWN, Origin.NONE):
        return ""
    shown = look(status)
    return f"{shown.icon} {shown.word}"


def eta_text(status: ServerStatus, now: float) -> str:
    """`elapsed 1m 12s · ready in 7m 10s ± 20s, from 5 starts`, or says there is no history yet."""
    elapsed = duration(now - status.started_at) if status.started_at is not None else "-"
    return f"elapsed {elapsed} · {eta_phrase(status)}"


def eta_phrase(status: ServerStatus) -> str:
    """`ready in 7m 10s ± 20s, from 5 starts` / `ready in ~2m 05s, from 1 start` / `ETA: no history yet`."""
    if status.eta_remaining is None:
        return "ETA: no history yet"
    # A spread under the second it is shown in says nothing (identical past starts, e.g. a simulator): "~".
    shown = status.eta_spread is not None and status.eta_spread >= 0.5
    spread = f" ± {duration(status.eta_spread)}" if shown else ""
    approx = "" if spread else "~"
    n = status.eta_samples
    source = f", from {n} start{'s' if n != 1 else ''}" if n else ""
    return f"ready in {approx}{duration(status.eta_remaining)}{spread}{source}"


def progress_text(status: ServerStatus) -> str:
    """`shard 29/64`, `batch sizes 12/36`: the unit the engine counts in this phase; '' without progress."""
    progress = status.progress
    if progress is None or not progress.total:
        return ""
    unit = progress.unit or ("shard" if status.phase is Phase.LOADING_WEIGHTS else "batch sizes")
    return f"{unit} {progress.done}/{progress.total}"


# -- headless -------------------------------------------------------------------------------------------


def headless_line(status: ServerStatus, now: float) -> str | None:
    """The line the headless CLI prints when the state changes, or None when there is nothing real to say
    (not looked yet, or looked and nothing runs: a made-up `stopped` before anything happened is noise)."""
    if status.origin in (Origin.UNKNOWN, Origin.NONE) and look(status).key in ("unknown", "stopped"):
        return None
    elapsed = now - status.started_at if status.started_at is not None else 0.0
    shown = look(status)
    extra = [part for part in (origin_text(status), f"pid {status.pid}" if status.pid else "", status.note) if part]
    if status.phase is Phase.CRASHED and status.crash is not None:
        extra.append(status.crash.reason)
    tail = f" ({'; '.join(extra)})" if extra else ""
    return f"[{_short(elapsed):>6}] {shown.word}{tail}"


def headless_progress(status: ServerStatus) -> str:
    """The progress line under a starting phase: `29/64 shard  45%  ready in 7m 10s ± 20s, from 5 starts`."""
    progress = status.progress
    if not status.phase.is_startup:
        return ""
    parts = []
    if progress is not None and progress.total:
        parts.append(f"{progress.done}/{progress.total} {progress.unit}".rstrip())
        parts.append(f"{progress.fraction:4.0%}")
    parts.append(eta_phrase(status))
    return "         " + "  ".join(parts)


def leftovers_text(status: ServerStatus, host: str) -> str:
    """After a crash with processes left in the run's group: what they are and how to clean them up
    headless; '' when nothing is left."""
    if not status.leftovers:
        return ""
    listed = "\n".join(f"  {line}" for line in status.leftovers)
    return (
        f"{len(status.leftovers)} process(es) of the crashed run are still alive in its process group "
        f"(holding memory or the port):\n{listed}\nclean them up with: specdash down {shlex.quote(host)}"
    )


def _short(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


# -- dialogs --------------------------------------------------------------------------------------------


def server_name(status: ServerStatus, host: str) -> str:
    """`baseline (pid 123) on gpu-box`."""
    pid = f" (pid {status.pid})" if status.pid is not None else ""
    return f"{status.mode or 'the server'}{pid} on {host}"


def stop_question(status: ServerStatus, host: str, *, grace: float | None = None) -> str:
    """The stop confirmation; for an adopted server it names the PID and the command, since specdash
    did not start it; after a crash it lists the processes left to clean up."""
    if status.phase is Phase.CRASHED and status.leftovers:
        listed = "; ".join(status.leftovers[:6]) + (" …" if len(status.leftovers) > 6 else "")
        return (
            f"{status.mode or 'The server'} on {host} crashed, and {len(status.leftovers)} process(es) of its "
            f"group are still alive: {listed}. Kill them (SIGTERM to the group, then SIGKILL)?"
        )
    after = f" after {grace:g} s" if grace is not None else ""
    if status.origin is Origin.ADOPTED:
        command = shlex.join(status.command) if status.command else "?"
        return (
            f"Stop pid {status.pid} on {host}, which specdash did not start: {command} — "
            f"its process group {status.pid} gets SIGTERM, then SIGKILL{after}?"
        )
    return f"Stop {server_name(status, host)}?"


@dataclass(frozen=True)
class PlanStep:
    """What a sweep does for one mode."""

    mode: str
    """The mode measured."""
    action: Literal["measure", "start", "restart"]
    """`measure` the live server as it runs, `start` one (nothing runs), or `restart`: stop the live
    server, then start this mode."""
    stops: str = ""
    """For `restart`: which server is stopped (`baseline (pid 123)`), when known."""


def sweep_plan(status: ServerStatus, modes: Sequence[str]) -> tuple[PlanStep, ...]:
    """What a sweep over `modes` does, from the server's state now: the dialog says this, the session does it.

    A live server in the first mode is measured as it runs (a restart would throw a long load away); every
    later mode restarts the server.
    """
    running = status.mode if is_live(status) else ""
    name = f"{status.mode} (pid {status.pid})" if status.pid is not None else status.mode
    steps: list[PlanStep] = []
    for mode in modes:
        if mode == running:
            steps.append(PlanStep(mode, "measure"))
        elif running:
            steps.append(PlanStep(mode, "restart", stops=name))
        else:
            steps.append(PlanStep(mode, "start"))
        running, name = mode, mode
    return tuple(steps)


def sweep_question(status: ServerStatus, modes: Sequence[str], host: str) -> str | None:
    """The confirmation an A/B needs when it stops the live server, saying exactly what it does; None when
    it stops nothing that runs now (then there is nothing to confirm)."""
    plan = sweep_plan(status, modes)
    if not is_live(status) or not any(step.action == "restart" for step in plan):
        return None
    said: list[str] = []
    for i, step in enumerate(plan):
        if step.action == "measure":
            said.append(f"measures {step.mode} as it runs (pid {status.pid}, no restart)")
        elif step.action == "restart":
            said.append(f"stops {step.stops} and starts {step.mode}" if i == 0 else f"restarts into {step.mode}")
        else:
            said.append(f"starts {step.mode}")
    return f"A/B {' vs '.join(modes)} on {host}: " + ", then ".join(said) + "."


CRASH_CARD_LINES = 3
"""The last log lines a crash card shows (the whole excerpt is a `c` away, in the log)."""


def crash_card(
    mode: str,
    concurrency: int,
    reason: str,
    excerpt: Sequence[str],
    running: int | None,
    rerun: Sequence[int],
    server_back: bool,
) -> str:
    """The crash tied to the load that caused it: the mode and level, the requests running when it died (when
    the sweep saw them), the exception and the last log lines before it, and the key that reruns the levels
    around it (once a server is back: `s` starts one)."""
    load = f", {running} requests running" if running is not None else ""
    lines = [f"✗ CRASH at C={concurrency} ({mode}{load}): {reason}"]
    tail = [line for line in excerpt if line.strip() and line.strip() != reason.strip()][-CRASH_CARD_LINES:]
    levels = ",".join(map(str, rerun))
    # The way out second: on a short terminal the lines under the table show 4 rows before they scroll.
    if server_back:
        lines.append(
            f"  R: rerun {mode} at C={levels} (the crash's level and its neighbours) · c: the crash in the log"
        )
    else:
        lines.append(f"  s starts {mode} again, then R reruns C={levels} · c: the crash in the log")
    lines += [f"  │ {line}" for line in tail]
    return "\n".join(lines)
