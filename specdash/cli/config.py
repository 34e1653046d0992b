"""`specdash config init|path|check`: write, locate and validate the config file."""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path

from specdash import config, paths
from specdash.errors import UsageError

NAME = "config"
HELP = "write an example config (init), print its path (path), or validate it (check)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["init", "path", "check"])
    parser.add_argument("--config", type=Path, help="config file (default: $SPECDASH_CONFIG or the XDG path)")
    parser.add_argument("--force", action="store_true", help="init: overwrite an existing file")


def example_text() -> str:
    """The commented example config shipped with the package."""
    return resources.files("specdash").joinpath("example_config.toml").read_text(encoding="utf-8")


def run(args: argparse.Namespace) -> int:
    path: Path = args.config or paths.config_file()
    if args.action == "path":
        print(path)
        return 0
    if args.action == "init":
        if path.exists() and not args.force:
            raise UsageError(f"{path} already exists (use --force to overwrite it)")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(example_text(), encoding="utf-8")
        print(f"wrote {path}")
        return 0
    if not path.exists():
        raise UsageError(f"no config file at {path} (run 'specdash config init')")
    from specdash.engines.registry import names, resident_refusal

    cfg = config.load(path, engines=names(), residency=resident_refusal)
    print(f"{path}: OK, {len(cfg.hosts)} host(s), {len(cfg.modes)} mode(s): {', '.join(cfg.modes)}")
    return 0
