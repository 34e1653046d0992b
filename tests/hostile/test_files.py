"""Hostile files (issue 14, points 4, 5, 9): FIFO, /dev/zero, sparse multi-GB, binary, nested, huge.

Through the real CLI: as the config (`SPECDASH_CONFIG` and `--config`) and as `--prompts`. Each gives one
error line naming the file, exit 2, no traceback, no hang, and bounded memory.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.hostile_cli import assert_clean_failure, run_cli

Maker = Callable[[Path], Path]


def fifo(d: Path) -> Path:
    p = d / "fifo"
    os.mkfifo(p)
    return p


def dev_zero(d: Path) -> Path:
    return Path("/dev/zero")


def sparse(d: Path) -> Path:
    p = d / "sparse"
    with p.open("wb") as f:
        f.truncate(4 * 1024**3)  # 4 GiB of holes: no disk used
    return p


def big(d: Path) -> Path:
    p = d / "big"
    line = b'{"prompt": "' + b"x" * 1000 + b'"}\n'
    with p.open("wb") as f:
        for _ in range(70 * 1024):  # ~70 MB, over every text-file limit
            f.write(line)
    return p


def binary(d: Path) -> Path:
    p = d / "binary"
    p.write_bytes(bytes(range(256)) * 64)
    return p


def nul_text(d: Path) -> Path:
    p = d / "nul"
    p.write_bytes(b'{"prompt": "a\x00b"}\n\x00\x00\x00')
    return p


def nested_json(d: Path) -> Path:
    p = d / "nested.jsonl"
    p.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    return p


def nested_toml(d: Path) -> Path:
    p = d / "nested.toml"
    p.write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n")
    return p


def directory(d: Path) -> Path:
    p = d / "dir"
    p.mkdir()
    return p


CONFIG_FILES: dict[str, tuple[Maker, str]] = {
    "fifo": (fifo, "not a regular file"),
    "dev-zero": (dev_zero, "not a regular file"),
    "sparse-4GiB": (sparse, "more than the limit"),
    "big-70MB": (big, "more than the limit"),
    "binary": (binary, "cannot read config"),
    "nested-toml": (nested_toml, "nested too deeply"),
    "directory": (directory, "not a regular file"),
}

PROMPT_FILES: dict[str, tuple[Maker, str]] = {
    "fifo": (fifo, "not a regular file"),
    "dev-zero": (dev_zero, "not a regular file"),
    "sparse-4GiB": (sparse, "more than the limit"),
    "big-70MB": (big, "more than the limit"),
    "binary": (binary, "not UTF-8"),
    "nul": (nul_text, "NUL"),
    "nested-json": (nested_json, "RecursionError"),
    "directory": (directory, "not a regular file"),
}


@pytest.mark.parametrize("how", ["env", "flag"])
@pytest.mark.parametrize("name", sorted(CONFIG_FILES))
def test_hostile_config_file(name: str, how: str, tmp_path: Path) -> None:
    make, needle = CONFIG_FILES[name]
    path = make(tmp_path)
    if how == "env":
        done = run_cli(("config", "check"), tmp_path / "home", config=path, timeout=60)
    else:
        done = run_cli(("status", "box", "--config", str(path)), tmp_path / "home", timeout=60)
    assert_clean_failure(done, 2, str(path), needle)


@pytest.mark.parametrize("name", sorted(PROMPT_FILES))
def test_hostile_prompts_file(name: str, tmp_path: Path) -> None:
    make, needle = PROMPT_FILES[name]
    path = make(tmp_path)
    done = run_cli(("bench", "--url", "http://127.0.0.1:9", "--prompts", str(path)), tmp_path / "home", timeout=60)
    assert_clean_failure(done, 2, str(path), needle)


# `config check` refuses what launching would refuse (point 9).
MODE = '[modes.m]\nengine = "sglang"\nmodel = "/m"\n'
CHECKS = {
    "launcher-empty-list": (MODE + "launcher = []", "[modes.m] launcher"),
    "launcher-empty-program": (MODE + 'launcher = [""]', "[modes.m] launcher"),
    "jump-user-only": ('[hosts.h]\naddress = "h"\njump = "u@"', "[hosts.h] jump"),
    "jump-chain-bad-hop": ('[hosts.h]\naddress = "h"\njump = "a,b:0"', "[hosts.h] jump"),
    "env-name-with-equals": (MODE + 'env = { "A=B" = "x" }', "[modes.m] env.A=B"),
    "env-name-empty": (MODE + 'env = { "" = "x" }', "[modes.m] env."),
    "host-env-name-space": ('[hosts.h]\naddress = "h"\nenv = { "A B" = "x" }', "[hosts.h] env.A B"),
    "args-nul": (
        MODE + 'args = ["--x", "a\\u0000b"]',
        "[modes.m] args",
    ),
    "env-value-nul": (MODE + 'env = { A = "a\\u0000" }', "[modes.m] env.A"),
    "stop-timeout-nan": (MODE + "stop_timeout = nan", "[modes.m] stop_timeout"),
    "stop-timeout-inf": (MODE + "stop_timeout = inf", "[modes.m] stop_timeout"),
    "link-wait-nan": ("[bench]\nlink_wait = nan", "[bench] link_wait"),
}


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_config_check_rejects_what_launching_would(name: str, tmp_path: Path) -> None:
    text, needle = CHECKS[name]
    config = tmp_path / "config.toml"
    config.write_text(text)
    done = run_cli(("config", "check"), tmp_path / "home", config=config)
    assert_clean_failure(done, 2, str(config), needle)


def test_export_with_a_mistyped_db_creates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "nope" / "typo.db"
    for argv in (("export", "1", "--json", "--db", str(db)), ("compare", "1", "2", "--db", str(db))):
        done = run_cli(argv, tmp_path / "home")
        assert_clean_failure(done, 1, str(db), "no such file")
    assert not db.exists() and not db.parent.exists()


def test_store_that_is_not_a_database_is_named(tmp_path: Path) -> None:
    db = tmp_path / "garbage.db"
    db.write_bytes(os.urandom(8192))
    done = run_cli(("export", "1", "--json", "--db", str(db)), tmp_path / "home")
    assert_clean_failure(done, 1, str(db))


def test_replay_of_a_huge_log_runs_in_bounded_memory(tmp_path: Path) -> None:
    """Before the streaming replay (wt-logs): 348 MiB for this 100 MB log, 810-950 MiB for 200 MB."""
    log = tmp_path / "server.log"
    line = b"[2025-01-01 00:00:00] INFO: noise " + b"n" * 990 + b"\n"
    with log.open("wb") as f:
        f.write(b"[2025-01-01 00:00:00] server_args=ServerArgs(model_path='/m', port=30000)\n")
        for _ in range(100 * 1024):  # ~100 MB of long lines
            f.write(line)
    done = run_cli(("replay", str(log)), tmp_path / "home", timeout=600)
    # Exit 3: the documented code of a startup that never finished (the outcome is the output).
    assert done.code == 3 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "result: incomplete" in done.stdout
    assert done.peak_rss_mib < 300, done.peak_rss_mib


@pytest.mark.parametrize("name", ["fifo", "dev-zero", "directory"])
def test_replay_refuses_what_is_not_a_file(name: str, tmp_path: Path) -> None:
    path = CONFIG_FILES[name][0](tmp_path)
    done = run_cli(("replay", str(path)), tmp_path / "home", timeout=60)
    assert_clean_failure(done, 2, str(path))
