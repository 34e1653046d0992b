"""`specdash connect HOST`: the dashboard for one host over one supervised SSH connection."""

from __future__ import annotations

import argparse
import sys

from specdash.cli._dashboard import add_screenshot_argument
from specdash.cli._host import add_host_arguments, host_config, load_config, open_session

NAME = "connect"
HELP = "open the dashboard for HOST: attach to its live server, or start/switch modes from the keyboard"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_host_arguments(parser)
    parser.add_argument("--mode", "-m", help="start this mode on connect if no server is running")
    add_screenshot_argument(parser)


def run(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    if args.mode:
        cfg.mode(args.mode)  # a usage error before the screen opens
    session = open_session(args, cfg, host_config(args, cfg))
    session.greedy_prompts = cfg.bench.greedy_prompts  # the dashboard's greedy check (key and after an A/B)
    from specdash.ui.app import make_app

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
