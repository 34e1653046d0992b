"""known_hosts lookups, lines and messages (no network: keys are generated locally)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import asyncssh
import pytest

from specdash.remote.knownhosts import (
    HostKeyPolicy,
    append_known_host,
    find_host_lines,
    host_pattern,
    known_hosts_line,
)


@pytest.fixture(scope="module")
def keys() -> tuple[asyncssh.SSHKey, asyncssh.SSHKey]:
    return asyncssh.generate_private_key("ssh-ed25519"), asyncssh.generate_private_key("ssh-ed25519")


def test_host_pattern_matches_openssh() -> None:
    assert host_pattern("h", 22) == "h"
    assert host_pattern("127.0.0.1", 2222) == "[127.0.0.1]:2222"


def test_append_writes_a_proper_line_and_creates_the_file(tmp_path: Path, keys: tuple[asyncssh.SSHKey, ...]) -> None:
    path = tmp_path / "new" / "known_hosts"
    append_known_host(path, "127.0.0.1", 2222, keys[0])
    path.write_text(path.read_text() + "other.host ssh-ed25519 AAAA")  # no trailing newline on purpose
    append_known_host(path, "gpu1", 22, keys[1])
    lines = path.read_text().splitlines()
    blob = keys[0].export_public_key("openssh").decode().split()[1]
    assert lines[0] == f"[127.0.0.1]:2222 ssh-ed25519 {blob}"
    assert lines[2].startswith("gpu1 ssh-ed25519 ")
    assert path.stat().st_mode & 0o777 == 0o600
    # ssh-keygen agrees that the file holds the key under the bracketed name.
    found = subprocess.run(["ssh-keygen", "-F", "[127.0.0.1]:2222", "-f", str(path)], capture_output=True, text=True)
    assert blob in found.stdout


def test_find_host_lines_names_file_and_line(tmp_path: Path, keys: tuple[asyncssh.SSHKey, ...]) -> None:
    path = tmp_path / "known_hosts"
    path.write_text(
        "# comment\n"
        + known_hosts_line("other", 22, keys[1])
        + "\n"
        + known_hosts_line("127.0.0.1", 2222, keys[0])
        + "\n@revoked * "
        + " ".join(known_hosts_line("x", 22, keys[1]).split()[1:])
        + "\n"
    )
    assert find_host_lines([path, tmp_path / "missing"], "127.0.0.1", "127.0.0.1", 2222) == [(path, 3)]
    assert find_host_lines([path], "127.0.0.1", "127.0.0.1", 2223) == []


def test_find_host_lines_sees_hashed_entries(tmp_path: Path, keys: tuple[asyncssh.SSHKey, ...]) -> None:
    path = tmp_path / "known_hosts"
    path.write_text(known_hosts_line("gpu1.example", 22, keys[0]) + "\n")
    subprocess.run(["ssh-keygen", "-H", "-f", str(path)], check=True, capture_output=True)
    assert path.read_text().startswith("|1|")
    assert find_host_lines([path], "gpu1.example", "10.1.1.1", 22) == [(path, 1)]


def test_policy_unknown_refused_then_accepted(tmp_path: Path, keys: tuple[asyncssh.SSHKey, ...]) -> None:
    path = tmp_path / "known_hosts"
    refuse = HostKeyPolicy([path], accept_new=False)
    assert not refuse.check("127.0.0.1", "127.0.0.1", 2222, keys[0])
    assert refuse.problem is not None and refuse.problem.verdict == "unknown"
    assert keys[0].get_fingerprint() in refuse.problem.message()
    assert not path.exists()

    accept = HostKeyPolicy([path], accept_new=True)
    assert accept.check("127.0.0.1", "127.0.0.1", 2222, keys[0])
    assert path.read_text() == known_hosts_line("127.0.0.1", 2222, keys[0]) + "\n"


def test_policy_changed_key_refused_even_with_accept_new(tmp_path: Path, keys: tuple[asyncssh.SSHKey, ...]) -> None:
    path = tmp_path / "known_hosts"
    path.write_text(known_hosts_line("127.0.0.1", 2222, keys[0]) + "\n")
    policy = HostKeyPolicy([path], accept_new=True)
    assert not policy.check("127.0.0.1", "127.0.0.1", 2222, keys[1])
    assert policy.problem is not None and policy.problem.verdict == "changed"
    message = policy.problem.message()
    assert "man-in-the-middle" in message
    assert f"{path}:1" in message
    assert keys[1].get_fingerprint() in message
    assert path.read_text().count("\n") == 1  # nothing appended


def test_empty_files_mean_no_trusted_keys_not_asyncssh_default(tmp_path: Path) -> None:
    policy = HostKeyPolicy([tmp_path / "missing"], accept_new=False)
    # An empty value would make asyncssh read ~/.ssh/known_hosts instead.
    assert isinstance(policy.asyncssh_known_hosts(), asyncssh.SSHKnownHosts)


def test_accept_new_refuses_when_the_key_cannot_be_recorded(tmp_path: Path, keys: tuple[asyncssh.SSHKey, ...]) -> None:
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("")
    policy = HostKeyPolicy([blocker / "known_hosts"], accept_new=True)
    assert not policy.check("h", "10.0.0.1", 22, keys[0])
    assert policy.problem is not None and "cannot record it in" in policy.problem.message()
