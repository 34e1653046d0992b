"""`specdash config init|path|check`: write, locate and validate the config file."""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path

from specdash import config, paths
from specdash.cli._files import write_file
from specdash.engines.registry import names, resident_refusal
from specdash.errors import UsageError


def example_text() -> str:
    """The commented example config shipped with the package."""
    return resources.files("specdash").joinpath("example_config.toml").read_text(encoding="utf-8")


def run(args: argparse.Namespace) -> int:
    path: Path = args.config or paths.config_file()
    if args.action == "path":
        print(path)
        return 0
    if args.action == "init":
        if path.is_dir():
            raise UsageError(f"{path} is a directory (give the config file's name with --config)")
        if path.exists() and not args.force:
            raise UsageError(f"{path} already exists (use --force to overwrite it)")
        path.parent.mkdir(parents=True, exist_ok=True)
        write_file(path, example_text(), "the config")
        print(f"wrote {path}")
        return 0
    if not path.exists():
        raise UsageError(f"no config file at {path} (run 'specdash config init')")
    cfg = config.load(path, engines=names(), residency=resident_refusal)
    print(f"{path}: OK, {len(cfg.hosts)} host(s), {len(cfg.modes)} mode(s): {', '.join(cfg.modes)}")
    return 0
