"""Where specdash keeps its files on the local machine (XDG locations via platformdirs).

| what | where | who writes it |
|---|---|---|
| config | `$SPECDASH_CONFIG`, else `user_config_path("specdash")/config.toml` | the user, `specdash config init` |
| store | `user_data_path("specdash")/specdash.db` | startups, bench runs and samples |
| logs | `user_state_path("specdash")/log/` | asyncssh's and specdash's own logging |
| screenshots | `--screenshot-dir`, else the current dir, else `user_data_path("specdash")/screenshots` | palette |
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP = "specdash"


def config_file() -> Path:
    """The config file path: `SPECDASH_CONFIG` wins over the XDG default."""
    override = os.environ.get("SPECDASH_CONFIG")
    if override:
        return Path(override).expanduser()
    return platformdirs.user_config_path(APP) / "config.toml"


def data_dir() -> Path:
    """The directory of the local SQLite store."""
    return platformdirs.user_data_path(APP)


def log_dir() -> Path:
    """The directory of specdash's own log files (never the terminal)."""
    return platformdirs.user_state_path(APP) / "log"


def screenshot_dir() -> Path:
    """Where the palette's Screenshot saves: the current directory when it is writable, else the data dir.

    Never `~/Downloads` (Textual's default), which a headless host does not have.
    """
    here = Path.cwd()
    return here if os.access(here, os.W_OK) else data_dir() / "screenshots"
