"""`specdash connect` with several hosts or a `[fleet.NAME]`: the usage errors, before any screen or connection."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from specdash import config
from specdash.engines.registry import names
from specdash.errors import UsageError
from tests.support.cli import cli


def connect(*args: str, cfg: Path) -> subprocess.CompletedProcess[str]:
    return cli("connect", *args, env={"SPECDASH_CONFIG": str(cfg)})


def test_several_hosts_refuse_mode_and_a_host_named_twice(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[fleet.lab]\nhosts = ["a", "b", "a"]\n')
    done = connect("a", "b", "--mode", "x", cfg=cfg)
    assert done.returncode == 2 and "--mode starts a server on one host" in done.stderr
    assert "Traceback" not in done.stderr
    done = connect("lab", cfg=cfg)
    assert done.returncode == 2 and "host 'a' is named twice in the fleet" in done.stderr


def test_a_fleet_table_is_validated_naming_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[fleet.lab]\nhosts = []\n")
    with pytest.raises(UsageError, match=r"\[fleet.lab\] hosts: must list at least one host"):
        config.load(path, engines=names())
    path.write_text('[fleet.lab]\nhost = ["a"]\n')
    with pytest.raises(UsageError, match=r"\[fleet.lab\] host: unknown key"):
        config.load(path, engines=names())
    path.write_text('[fleet.lab]\nhosts = ["a", "b"]\n')
    assert config.load(path, engines=names()).fleets == {"lab": ("a", "b")}
