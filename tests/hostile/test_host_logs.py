"""A host's log and run record as a hostile party leaves them, through the real CLI over a real sshd (issue 29).

Point 1: what `logs` (and `logs -f`) prints from a server log is escaped (OSC 52 clipboard writes, window
titles, C1 controls, bidi overrides), `--raw` gives the bytes. Point 5: a log truncated in place leaves no
hole of NULs (the server's output is appended) and `logs -n` reads a bounded tail. Point 4: an empty or
garbled `current` is a damaged record, never "no server", and the port check still refuses a second launch.
Point 9: `-n 10^20` is a usage error naming `-n`.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hostile.test_host import Box, _uid
from tests.integration.conftest import ssh_keys, sshd  # noqa: F401  (fixtures)
from tests.support.eventually import eventually_sync
from tests.support.hostile_cli import assert_clean_failure, cli_env
from tests.support.sshd import Keys, Sshd

HOSTILE_LINES = [
    "clip \x1b]52;c;ZWNobyBwd25lZA==\x07 done",  # OSC 52: writes the clipboard
    "title \x1b]0;pwned\x1b\\ done",  # OSC 0 with an ST terminator: retitles the window
    "csi \x1b[2J\x1b[H cleared",  # clears the screen
    "c1 \u009b31m one-byte CSI \u009d0;x\u009c",  # C1 controls (CSI, OSC, ST) in UTF-8
    "bidi \u202eevil\u202c \u2066iso\u2069",  # right-to-left override, isolates
    "bell \x07\x07 nul \x00 del \x7f bs \x08",
]
"""Log lines that act on a terminal if printed raw: each must reach the user escaped."""
_ACTING = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def _printf_script(lines: list[str]) -> str:
    """A shell script that prints `lines` byte for byte (octal escapes) and then idles."""
    body = "".join(f"\\{b:03o}" for b in "\n".join(lines).encode() + b"\n")
    return f"printf '{body}'; trap '' TERM; while :; do sleep 1; done"


def _env(box: Box) -> dict[str, str]:
    env = cli_env(box.home, box.config)
    if os.environ.get("SPECDASH_SRC_UNDER_TEST"):  # an older checkout, as `run_cli` does
        env["PYTHONPATH"] = os.environ["SPECDASH_SRC_UNDER_TEST"]
    return env


def _cli(box: Box, *argv: str, timeout: float = 120) -> tuple[int, bytes, str]:
    """The CLI's exit code, raw stdout bytes and stderr text."""
    done = subprocess.run(
        [sys.executable, "-m", "specdash", *argv],
        capture_output=True,
        env=_env(box),
        cwd=box.home,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    return done.returncode, done.stdout, done.stderr.decode(errors="replace")


@pytest.fixture
def hostile_box(tmp_path: Path, sshd: Sshd, ssh_keys: Keys) -> Iterator[Box]:  # noqa: F811
    b = Box(tmp_path, sshd, ssh_keys, script=_printf_script(HOSTILE_LINES))
    b.home.mkdir(parents=True, exist_ok=True)
    yield b
    b.cleanup()


def test_logs_escape_what_the_server_wrote_and_raw_gives_the_bytes(hostile_box: Box) -> None:
    box = hostile_box
    code, _, err = _cli(box, "up", "box", "--mode", "sleeper")
    assert code == 0, err
    log = box.run_dir() / "server.log"
    eventually_sync(lambda: log.read_bytes().count(b"\n") >= len(HOSTILE_LINES), timeout=60, what="the log lines")
    code, out, err = _cli(box, "logs", "box", "-n", "20")
    assert code == 0, err
    text = out.decode()
    lines = text.splitlines()
    assert len(lines) == len(HOSTILE_LINES), lines
    for line in lines:
        assert not _ACTING.search(line), repr(line)
    assert "\\x1b]52;c;ZWNobyBwd25lZA==\\x07 done" in text  # shown as read, not dropped
    assert "\\u202eevil\\u202c" in text and "\\x9b31m" in text and "\\x00" in text
    code, raw, err = _cli(box, "logs", "box", "-n", "20", "--raw")
    assert code == 0, err
    assert raw == log.read_bytes(), "--raw is not the log's bytes"
    # `logs -f` prints through the same escape: its first screenful holds the same lines, escaped.
    with tempfile.TemporaryFile() as out_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "specdash", "logs", "box", "-f", "-n", "20"],
            stdout=out_file,
            stderr=subprocess.DEVNULL,
            env=_env(box),
            cwd=box.home,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:

            def followed() -> bytes:
                out_file.seek(0)
                return out_file.read()

            got = eventually_sync(
                followed, timeout=60, what="logs -f output", until=lambda b: b.count(b"\n") >= len(HOSTILE_LINES)
            )
        finally:
            os.killpg(proc.pid, 9)
            proc.wait()
    assert got.decode().splitlines() == lines


def test_logs_n_out_of_range_is_a_usage_error(hostile_box: Box) -> None:
    for value in ("100000000000000000000", "-1", "1e3", "5x"):
        done = hostile_box.cli("logs", "box", "-n", value)
        assert_clean_failure(done, 2, "-n")
        assert "cannot read the log" not in done.stderr


def test_log_truncated_in_place_leaves_no_hole(tmp_path: Path, sshd: Sshd, ssh_keys: Keys) -> None:  # noqa: F811
    """2 MB of output, then the log is truncated in place (`: > server.log`, as logrotate's copytruncate does)
    while the server keeps writing: with the output appended, the file restarts at 0 (no hole of NULs), and
    `logs -n 5` prints only the last lines, in bounded memory."""
    script = "head -c 2000000 /dev/zero | tr '\\0' x; echo; i=0; while :; do echo tick-$i; i=$((i+1)); sleep 0.2; done"
    box = Box(tmp_path, sshd, ssh_keys, script=script)
    try:
        assert box.cli("up", "box", "--mode", "sleeper").code == 0
        log = box.run_dir() / "server.log"
        eventually_sync(lambda: b"tick-" in log.read_bytes(), timeout=60, what="the first tick")
        os.truncate(log, 0)
        eventually_sync(lambda: b"tick-" in log.read_bytes(), timeout=60, what="a tick after the truncation")
        assert log.stat().st_size < 100_000, "a hole: the server's output is not appended"
        assert b"\0" not in log.read_bytes()
        done = box.cli("logs", "box", "-n", "5")
        assert done.code == 0, done.stderr
        assert 1 <= len(done.stdout.splitlines()) <= 5 and "\\x00" not in done.stdout, done.stdout[:300]
    finally:
        box.cleanup()


def test_logs_read_a_bounded_tail_of_a_huge_line(tmp_path: Path, sshd: Sshd, ssh_keys: Keys) -> None:  # noqa: F811
    """A log of 40 MB of NULs without a line break (what a hole reads as): `logs -n 5` and `status` read only
    the log's last `LOG_TAIL_BYTES`, so their output and memory are bounded whatever the file holds."""
    from specdash.limits import LOG_TAIL_BYTES

    box = Box(tmp_path, sshd, ssh_keys)
    try:
        assert box.cli("up", "box", "--mode", "sleeper").code == 0
        log = box.run_dir() / "server.log"
        eventually_sync(lambda: b"line-two" in log.read_bytes(), timeout=60, what="the log lines")
        with log.open("ab") as f:
            f.truncate(40 * 1024 * 1024)
        done = box.cli("logs", "box", "-n", "5")
        assert done.code == 0, done.stderr
        assert len(done.stdout) <= 4 * LOG_TAIL_BYTES + 100, len(done.stdout)
        assert done.peak_rss_mib < 300, done.peak_rss_mib
        status = box.cli("status", "box")
        assert status.code == 0 and "sleeper" in status.stdout, status.stderr
        assert status.peak_rss_mib < 300, status.peak_rss_mib
    finally:
        box.cleanup()


@pytest.mark.parametrize("current", [b"", b"\n", b"\x00\x00\x00", b"../../etc\n"])
def test_damaged_current_is_reported_and_the_port_check_protects(
    current: bytes,
    tmp_path: Path,
    sshd: Sshd,  # noqa: F811
    ssh_keys: Keys,  # noqa: F811
) -> None:
    """A live server that listens on its port, then `current` emptied or garbled: status says damaged (not
    stopped), down signals nothing and says so, and `up` refuses the busy port (no second server)."""
    # The box's token ($0) stays in the server's command line (as the directory it would serve), so the test
    # finds it: `real` below, and the cleanup that kills it.
    script = 'echo listening; exec python3 -m http.server "$6" --bind 127.0.0.1 --directory "/nonexistent/$0"'
    box = Box(tmp_path, sshd, ssh_keys, script=script)
    try:
        assert box.cli("up", "box", "--mode", "sleeper").code == 0
        port = int(re.search(r"port = (\d+)", box.config.read_text()).group(1))  # type: ignore[union-attr]
        eventually_sync(lambda: _listening(port), timeout=60, what="the server listening")
        real = box.pids()
        assert len(real) == 1, real
        (box.state / "current").write_bytes(current)
        os.chown(box.state / "current", *_uid())
        status = box.cli("status", "box")
        assert status.code == 0 and "damaged" in status.stdout, (status.stdout, status.stderr)
        assert "stopped" not in status.stdout and "pid 0" not in status.stdout, status.stdout
        down = box.cli("down", "box")
        assert_clean_failure(down, 1, "damaged")
        assert box.pids() == real
        up = box.cli("up", "box", "--mode", "sleeper")
        assert_clean_failure(up, 1, str(port))
        assert box.pids() == real, "a second server was launched"
    finally:
        box.cleanup()


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_record_writes_are_atomic() -> None:
    """Every write of `pid` and `current` in the host scripts goes through a temporary file and a rename."""
    scripts = Path(__file__).parents[2] / "specdash" / "server" / "scripts"
    for script in scripts.glob("*.sh"):
        for line in script.read_text().splitlines():
            for name in ("/pid", "/current"):
                if re.search(rf'>\s*"[^"]*{name}"', line):
                    raise AssertionError(f"{script.name}: non-atomic write of {name}: {line.strip()}")


@pytest.mark.parametrize("how", ["to-own-dir", "to-other-users-dir", "to-root-dir", "dangling", "link-not-ours"])
def test_state_dir_symlink(how: str, tmp_path: Path, sshd: Sshd, ssh_keys: Keys) -> None:  # noqa: F811
    """A state dir that is a symlink (cluster homes often are): accepted when the link is the user's and its
    final target passes the same checks (the user's, not writable by others); refused when it leads elsewhere
    (issue 29 point 9)."""
    box = Box(tmp_path, sshd, ssh_keys)
    uid, gid = _uid()
    base = box.state.parent
    base.mkdir(parents=True, exist_ok=True)
    os.chown(base, uid, gid)
    target = base / f"target-{how}"
    target.mkdir(mode=0o700)
    if how in ("to-own-dir", "link-not-ours"):
        os.chown(target, uid, gid)
    elif how == "to-other-users-dir":
        os.chown(target, 65534, 65534)  # nobody
    elif how == "dangling":
        target.rmdir()
    box.state.symlink_to(target)
    if how != "link-not-ours":
        os.lchown(box.state, uid, gid)
    try:
        up = box.cli("up", "box", "--mode", "sleeper")
        if how == "to-own-dir":
            assert up.code == 0, up.stderr
            assert box.pids() and (target / "current").is_file()
            status = box.cli("status", "box")
            assert status.code == 0 and "sleeper" in status.stdout, status.stderr
            assert box.cli("down", "box").code == 0
        else:
            assert_clean_failure(up, 1, "refusing the state directory", "symlink")
            assert box.pids() == []
    finally:
        box.cleanup()
        box.state.unlink(missing_ok=True)
        shutil.rmtree(target, ignore_errors=True)
