"""What every host command shares: its config, its host, and opening the session (the HOST argument and its
OpenSSH-like flags are declared in `specdash.cli.options`)."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from specdash import config as config_mod
from specdash.bench.store import Store
from specdash.bench.sweep_data import SweepConfig
from specdash.cli._slo import slo_from
from specdash.config import Config, HostConfig
from specdash.engines.registry import names, resident_refusal
from specdash.errors import UsageError
from specdash.remote.options import SSHOptions
from specdash.remote.ssh import SSHHost
from specdash.server.remote_session import RemoteSession, running
from specdash.server.session import Listener

if TYPE_CHECKING:
    from specdash.server.lifecycle import RunRecord
    from specdash.server.remote_session import RemoteSession


def load_config(args: argparse.Namespace) -> Config:
    """The config named by `--config` (or the default location, where a missing file means no config)."""
    if args.config is not None and not args.config.exists():
        raise UsageError(f"--config {args.config}: no such file")

    return config_mod.load(args.config, engines=names(), residency=resident_refusal)


def host_config(args: argparse.Namespace, cfg: Config) -> HostConfig:
    """The host named on the command line, from the config when it is there, with the flags applied."""
    base = cfg.hosts.get(args.host) or HostConfig(name=args.host, address=args.host)
    if args.jump:
        base = replace(base, jump=args.jump)
    if args.identity:
        base = replace(base, identity_file=str(args.identity))
    if args.known_hosts:
        base = replace(base, known_hosts=str(args.known_hosts))
    return base


def open_session(args: argparse.Namespace, cfg: Config, hc: HostConfig, store: Store | None = None) -> RemoteSession:
    """A `RemoteSession` for the host (not connected yet; `run()` connects); `store`: one shared by several
    sessions (the fleet), else the default store opened for this one."""

    options = SSHOptions(
        identity_files=(Path(hc.identity_file).expanduser(),) if hc.identity_file else (),
        jump=hc.jump,
        known_hosts=Path(hc.known_hosts).expanduser() if hc.known_hosts else None,
        accept_new=bool(getattr(args, "accept_new", False)),
    )
    # `bench HOST --db FILE` writes there; every other command uses the default store.

    sweep_defaults = SweepConfig(
        progress_interval_s=0.25,
        endpoint_follows_engine=True,  # the dashboard has no endpoint choice: each mode's engine's own
        on_link_loss=cfg.bench.on_link_loss,
        link_wait_s=cfg.bench.link_wait,
        probe=cfg.bench.probe,
        slo=slo_from(cfg.bench.slo, f"{cfg.path or 'config'}: [bench] slo"),  # the dashboard's sweeps too
    )
    return RemoteSession(
        SSHHost(hc.address, options),
        hc,
        cfg,
        store=store or Store(getattr(args, "db", None)),
        sweep_defaults=sweep_defaults,
    )


@contextlib.asynccontextmanager
async def current_run(args: argparse.Namespace) -> AsyncIterator[tuple[RemoteSession, Config, RunRecord | None]]:
    """For one-shot commands (down, status, logs): a connected session, its config, and the recorded run.

    Nothing is watched and nothing is started; the connection is closed on exit.
    """
    cfg = load_config(args)
    session = open_session(args, cfg, host_config(args, cfg))
    async with session.host:
        await session.host.connect()
        yield session, cfg, await session.lifecycle.current()


def connected(
    args: argparse.Namespace, cfg: Config, hc: HostConfig, listener: Listener | None = None
) -> contextlib.AbstractAsyncContextManager[RemoteSession]:
    """A running session for the host: connected and attached to its live run; closed on exit."""

    return running(open_session(args, cfg, hc), listener)
