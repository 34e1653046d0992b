"""Messages that must not mislead (issue 29 point 9), through the real CLI.

A damaged known_hosts is named `FILE:LINE` as OpenSSH names it (not an internal UnicodeDecodeError with raw
bytes); for `a@b@host` the error names the host, never `b@host` (the login user is `a@b`); a UTF-16 log is
replayed; a config with a byte-order mark is read.
"""

from __future__ import annotations

import codecs
import re
from pathlib import Path

import pytest

from tests.support.hostile_cli import assert_clean_failure, run_cli
from tests.support.ports import free_port

_ACTING = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
KEY_LINE = b"127.0.0.1 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"

DAMAGED = {
    "binary": (KEY_LINE + b"\xff\xfe\x00\x80garbage\x81" * 600 + b"\n", ":2:", "not UTF-8"),
    "binary-third-line": (KEY_LINE * 2 + b"ok \xc3\x28 broken\n", ":3:", "not UTF-8"),
    "one-word": (KEY_LINE + b"\n# a comment\njustoneword\n", ":4:", "bad known_hosts line"),
}


@pytest.mark.parametrize("case", list(DAMAGED))
def test_damaged_known_hosts_names_file_and_line(case: str, tmp_path: Path) -> None:
    data, where, what = DAMAGED[case]
    known = tmp_path / "known_hosts"
    known.write_bytes(data)
    done = run_cli(("status", f"nobody@127.0.0.1:{free_port()}", "--known-hosts", str(known)), tmp_path / "home")
    assert_clean_failure(done, 1, f"{known}{where}", what)
    assert "UnicodeDecodeError" not in done.stderr and "unexpected error" not in done.stderr
    assert len(done.stderr) < 500, done.stderr  # no raw bytes dumped


@pytest.mark.parametrize("user", ["a@b", "x@y@z"])
def test_user_with_at_sign_is_not_cut_at_it(user: str, tmp_path: Path) -> None:
    port = free_port()  # nothing listens: the connection is refused
    done = run_cli(("status", f"{user}@127.0.0.1:{port}"), tmp_path / "home")
    assert_clean_failure(done, 1, f"127.0.0.1:{port}")
    tail = user.split("@", 1)[1]
    assert f"{tail}@127.0.0.1" not in done.stderr, done.stderr


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-8-sig"])
def test_replay_of_a_utf16_or_bom_log(codec: str, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    text = (
        "[2026-03-22 13:53:40] Load weight begin. avail mem=78.00 GB\n"
        "[2026-03-22 13:54:40] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=60.00 GB\n"
        "[2026-03-22 13:55:40] The server is fired up and ready to roll!\n"
    )
    log.write_bytes(text.encode(codec))
    done = run_cli(("replay", str(log)), tmp_path / "home")
    assert done.code == 0, (done.stdout, done.stderr)
    assert "not a server log" not in done.stderr and "ready" in done.stdout


def test_config_with_a_bom(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_bytes(codecs.BOM_UTF8 + b'[modes.a]\nengine = "sglang"\nmodel = "m"\n')
    done = run_cli(("config", "check", "--config", str(config)), tmp_path / "home")
    assert "TOML syntax error" not in done.stderr, done.stderr
    assert done.code == 0, done.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ("replay", "/nonexistent/\x1b]0;pwned\x07log"),  # a path in an error
        ("logs", "box\x1b[2J", "-n", "\x9b31mx"),  # a value in argparse's error
        ("status", "\u202eevil@127.0.0.1:1"),  # a host string in an error
    ],
)
def test_errors_quote_text_escaped(argv: tuple[str, ...], tmp_path: Path) -> None:
    """Every error line passes through one escape (`safetext.escape_message`): what a file name, a value or a
    host string held is shown, never acts on the terminal (issue 29 point 1)."""
    done = run_cli(argv, tmp_path / "home")
    assert done.code in (1, 2), done.stderr
    assert not _ACTING.search(done.stderr.replace("\n", "")), repr(done.stderr)
    assert "Traceback" not in done.stderr


def test_replay_shows_a_file_name_escaped(tmp_path: Path) -> None:
    log = tmp_path / "server\x1b]0;pwned\x07.log"
    log.write_text("[2026-03-22 13:55:40] The server is fired up and ready to roll!\n")
    for argv in (("replay", str(log)), ("replay", "--json", str(log))):
        done = run_cli(argv, tmp_path / "home")
        assert done.code == 0, done.stderr
        assert "\x1b" not in done.stdout and "x1b]0;pwned" in done.stdout, done.stdout
