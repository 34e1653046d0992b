"""`specdash down HOST`: stop the server specdash started there (SIGTERM the group, SIGKILL after a grace), the
sleeping servers of resident modes (listed first; asked on a terminal), and the probe agents that load it (a
killed specdash leaves its agent running until its `link_wait` is over)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from specdash.cli._host import current_run
from specdash.config import Config
from specdash.core.events import ServerStatus
from specdash.core.status_text import stop_question
from specdash.errors import SpecdashError, UsageError
from specdash.phases import Origin, Phase
from specdash.server.lifecycle import RunRecord
from specdash.server.probe_agent import loopback_url, stop_agents
from specdash.server.resident import Sleeper


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_down(args))


async def _down(args: argparse.Namespace) -> int:
    async with current_run(args) as (session, cfg, record):
        if record is not None and record.damaged:
            raise SpecdashError(
                f"the run record {record.id} on {session.label} is damaged (empty or half-written): nothing was "
                f"signalled, since which processes are its own cannot be verified; stop its server by hand "
                f"(look at port {record.port or 'of its mode'}) and remove the record under the host's state_dir"
            )
        sleeping = await session.sleeping() if any(m.resident for m in cfg.modes.values()) else []
        live = record is not None and record.alive
        if not live and not sleeping:
            # Nothing to stop is what `down` wants: cleanup scripts call it unconditionally.
            print(f"Nothing to stop: no server started by specdash is running on {session.label}.")
            return 0
        if sleeping and not args.yes:
            _confirm_sleeping(record if live else None, sleeping, session.label)
        reports = []
        agents: list[int] = []
        if record is not None and record.alive:
            grace = args.grace if args.grace is not None else _grace(cfg, record.mode)
            if record.adopted and not args.yes:
                _confirm_adopted(record, session.label, grace)
            # The agents first, while the server still answers: they end their level cleanly (`done`, recorded
            # on the host) instead of failing every request they have in flight.
            agents = await stop_agents(session.host, loopback_url(record.port, record.server_host))
            reports.append(await session.lifecycle.stop(record, grace))
        for sleeper in sleeping:
            grace = args.grace if args.grace is not None else _grace(cfg, sleeper.record.mode)
            reports.append(await session.lifecycle.stop(sleeper.record, grace))
    for report in reports:
        print(report.summary())
    if agents:
        print(f"stopped {len(agents)} probe agent(s) loading it: pid {', '.join(map(str, agents))}")
    return 0 if all(r.port_free and not r.survivors for r in reports) else 1


def _confirm_sleeping(live: RunRecord | None, sleeping: list[Sleeper], label: str) -> None:
    """Sleeping servers are stopped with the live one; on a terminal, after a yes that lists them all."""
    names = [f"{live.mode} (pid {live.pid}, running)"] if live is not None else []
    names += [f"{s.record.mode} (pid {s.record.pid}, asleep, {s.held_gib:.1f} GiB held)" for s in sleeping]
    question = f"Stop {len(names)} server(s) on {label}: {', '.join(names)}?"
    if not sys.stdin.isatty():
        print(question.replace("Stop ", "stopping ", 1).rstrip("?"))
        return
    if input(f"{question} [y/N] ").strip().lower() not in ("y", "yes"):
        raise SpecdashError(f"not stopped: {len(names)} server(s) keep running on {label}")


def _confirm_adopted(record: RunRecord, label: str, grace: float) -> None:
    """A server specdash did not start is stopped only after a yes that names its PID and command."""
    status = ServerStatus(Phase.READY, mode=record.mode, pid=record.pid, origin=Origin.ADOPTED, command=record.command)
    question = stop_question(status, label, grace=grace)
    if not sys.stdin.isatty():
        raise UsageError(f"{question} Not asked on a terminal: pass --yes to stop it.")
    answer = input(f"{question} [y/N] ").strip().lower()
    if answer not in ("y", "yes"):
        raise SpecdashError(f"not stopped: pid {record.pid} keeps running on {label}")


def _grace(cfg: Config, mode: str) -> float:
    return cfg.modes[mode].stop_timeout if mode in cfg.modes else 30.0
