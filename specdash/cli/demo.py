"""`specdash demo`: the dashboard offline, against the built-in SGLang simulator over an embedded SSH server."""

from __future__ import annotations

import argparse
import asyncio

NAME = "demo"
HELP = "run the dashboard offline against the built-in SGLang simulator (no GPU, no sshd needed)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--autoplay",
        action="store_true",
        help="a scripted tour for presenters: baseline, sweep, EAGLE-3, sweep, crossover (any key stops it)",
    )


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_demo(args.autoplay))


async def _demo(autoplay: bool) -> int:
    from specdash.demo import demo_session
    from specdash.ui.app import make_app

    async with demo_session() as session:
        app = make_app(session, autoplay=autoplay)
        await app.run_async()
        return app.return_code or 0
