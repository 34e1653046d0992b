"""`specdash connect HOST`: the dashboard for one host over one supervised SSH connection; with several hosts
(or a `[fleet.NAME]`) the fleet view, one row and one connection per host."""

from __future__ import annotations

import argparse
import sys

from specdash.cli._host import host_config, load_config, open_session
from specdash.config import Config
from specdash.errors import UsageError
from specdash.ui.app import make_app


def run(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    names = [*cfg.fleets.get(args.host, (args.host,)), *args.more_hosts]
    if len(names) > 1:
        return run_fleet(args, cfg, names)
    if args.mode:
        cfg.mode(args.mode)  # a usage error before the screen opens
    session = open_session(args, cfg, host_config(args, cfg))
    session.greedy_prompts = cfg.bench.greedy_prompts  # the dashboard's greedy check (key and after an A/B)

    app = make_app(
        session, config_ui=cfg.ui, keymap=cfg.keymap, start_mode=args.mode, screenshot_dir=args.screenshot_dir
    )
    app.run()
    if app.connection_error is not None:
        print(f"specdash connect: cannot connect to {session.label}: {app.connection_error}", file=sys.stderr)
        return 1
    summary = app.exit_summary()
    # After the screen is gone: the terminal is ours again, and this is the last thing the user sees.
    print(summary or f"No server of ours is running on {session.label}.")
    return app.return_code or 0


def run_fleet(args: argparse.Namespace, cfg: Config, names: list[str]) -> int:
    """`connect a b c` or `connect FLEET`: one fleet view, each host its own session and connection."""
    if args.mode:
        raise UsageError("--mode starts a server on one host: open that host alone, or start it from its dashboard")
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise UsageError(f"host {twice[0]!r} is named twice in the fleet")
    from specdash.bench.store import Store
    from specdash.ui.fleet import FleetApp

    store = Store(getattr(args, "db", None))
    sessions = []
    for name in names:
        session = open_session(args, cfg, host_config(argparse.Namespace(**{**vars(args), "host": name}), cfg), store)
        session.greedy_prompts = cfg.bench.greedy_prompts
        sessions.append(session)
    app = FleetApp(sessions, config_ui=cfg.ui, screenshot_dir=args.screenshot_dir)
    app.run()
    summary = app.exit_summary()
    print(summary or f"No server of ours is running on {', '.join(names)}.")
    return app.return_code or 0
