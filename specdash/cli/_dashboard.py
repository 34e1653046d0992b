"""What the two dashboard commands (`connect`, `demo`) share on the command line."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_screenshot_argument(parser: argparse.ArgumentParser) -> None:
    """`--screenshot-dir DIR`: where the command palette's Screenshot saves its SVG (created if missing)."""
    parser.add_argument(
        "--screenshot-dir",
        type=Path,
        metavar="DIR",
        help="where the palette's Screenshot saves (created if missing; default: the current directory, "
        "or the specdash data directory when that is not writable)",
    )
