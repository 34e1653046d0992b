"""The local SSH log (`remote.connect.route_asyncssh_logging`): bounded by rotation, 0600, secrets redacted."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from specdash.limits import LOG_BACKUPS
from specdash.remote import connect

MAX = 4096


@pytest.fixture
def ssh_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setattr(connect, "LOG_MAX_BYTES", MAX)
    saved = {name: list(logging.getLogger(name).handlers) for name in ("asyncssh", "specdash.remote")}
    path = connect.route_asyncssh_logging(tmp_path / "log" / "ssh.log")
    yield path
    for name, handlers in saved.items():
        logger = logging.getLogger(name)
        for h in list(logger.handlers):
            if h not in handlers:
                logger.removeHandler(h)
                h.close()


def test_the_ssh_log_is_bounded_private_and_redacted(ssh_log: Path) -> None:
    for i in range(2000):  # ~300 KB of records, from both loggers that write to it
        name = "asyncssh" if i % 2 else "specdash.remote"
        logging.getLogger(name).info(
            "Command: SPECDASH_HOME=~/.specdash bash -s -- run-%d sglang --api-key sk-SECRET-%d HF_TOKEN=hf_SECRET_%d",
            i,
            i,
            i,
        )
    files = sorted(ssh_log.parent.glob("ssh.log*"))
    assert ssh_log in files and len(files) <= LOG_BACKUPS + 1, files
    record = 400  # one formatted record is well under this
    for f in files:
        assert f.stat().st_size <= MAX + record, (f, f.stat().st_size)
        assert f.stat().st_mode & 0o077 == 0, oct(f.stat().st_mode)
        body = f.read_text()
        assert "SECRET" not in body
        assert "--api-key '<redacted>'" in body or "--api-key <redacted>" in body, body[:400]
    assert ssh_log.parent.stat().st_mode & 0o077 == 0
    newest = ssh_log.read_text().splitlines()
    assert newest and "run-1999" in newest[-1]  # the latest record is kept, in the current file
