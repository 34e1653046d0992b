"""`specdash status HOST [--json]`: the run specdash knows on HOST, and where its startup is."""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import time

from specdash.cli._host import current_run
from specdash.cli._live import fmt_seconds
from specdash.core.timeline import replay_text
from specdash.limits import LOG_TAIL_BYTES
from specdash.phases import Phase
from specdash.server.lifecycle import RunRecord, run_framed
from specdash.server.remote_session import RemoteSession


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_status(args))


async def log_tail(session: RemoteSession, record: RunRecord) -> str:
    """The run's log's last bytes: where the startup got to (a long-running server's log can be much larger)."""
    _, log = await run_framed(session.host, f"tail -c {LOG_TAIL_BYTES} {shlex.quote(record.log_path)}")
    return log


def where_it_is(record: RunRecord, log: str) -> tuple[Phase, str]:
    """A recorded run's phase and reason from its log's tail: the highest phase the log reached, EXITED once
    its process is gone, CRASHED when the log shows a crash."""
    timeline = replay_text(log, record.engine)
    phase = timeline.highest_phase if record.alive else Phase.EXITED
    if timeline.outcome.value == "crashed":
        phase = Phase.CRASHED
    return phase, timeline.reason


async def _status(args: argparse.Namespace) -> int:
    async with current_run(args) as (session, cfg, record):
        sleeping = await session.sleeping() if any(m.resident for m in cfg.modes.values()) else []
        log = ""
        if record is not None and not record.damaged:
            log = await log_tail(session, record)
    if record is None:
        info: dict[str, object] = {"host": session.label, "state": Phase.STOPPED.value}
    elif record.damaged:  # no pid to trust: say so, never "exited, pid 0" (its server may well be running)
        info = {
            "host": session.label,
            "state": "damaged",
            "run": record.id,
            "mode": record.mode,
            "port": record.port,
            "reason": f"the run record {record.id} is damaged (its pid file is empty or half-written): "
            f"whether its server runs cannot be told; look at port {record.port} on the host",
        }
    else:
        phase, reason = where_it_is(record, log)
        info = {
            "host": session.label,
            "state": phase.value,
            "run": record.id,
            "mode": record.mode,
            "engine": record.engine,
            "pid": record.pid,
            "port": record.port,
            "alive": record.alive,
            "uptime_s": round(time.time() - record.started_at, 1) if record.alive else None,
            "log": record.log_path,
            "reason": reason or None,
        }
    info["sleeping"] = [
        {
            "mode": s.record.mode,
            "pid": s.record.pid,
            "port": s.record.port,
            "run": s.record.id,
            "held_gib": round(s.held_gib, 2),
        }
        for s in sleeping
    ]
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        parts = [f"{info['host']}: {info['state']}"]
        if record is not None and not record.damaged:
            parts.append(f"mode {record.mode} ({record.engine}), pid {record.pid}, port {record.port}")
            if record.alive:
                parts.append(f"up {fmt_seconds(time.time() - record.started_at)}")
            if info.get("reason"):
                parts.append(f"reason: {info['reason']}")
        print(", ".join(parts))
        for s in sleeping:
            where = f"pid {s.record.pid}, port {s.record.port}"
            print(f"  asleep: {s.record.mode}, {where}, {s.held_gib:.1f} GiB held on its busiest GPU")
    return 0
