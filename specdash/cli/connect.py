"""`specdash connect HOST`: the dashboard for one host over one supervised SSH connection."""

from __future__ import annotations

import argparse

from specdash.cli._host import host_config, load_config, open_session
from specdash.ui.app import make_app


def run(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    if args.mode:
        cfg.mode(args.mode)  # a usage error before the screen opens
    session = open_session(args, cfg, host_config(args, cfg))
    session.greedy_prompts = cfg.bench.greedy_prompts  # the dashboard's greedy check (key and after an A/B)

    app = make_app(
        session, config_ui=cfg.ui, keymap=cfg.keymap, start_mode=args.mode, screenshot_dir=args.screenshot_dir
    )
    app.run()
    summary = app.exit_summary()
    # After the screen is gone: the terminal is ours again, and this is the last thing the user sees.
    print(summary or f"No server of ours is running on {session.label}.")
    return app.return_code or 0
