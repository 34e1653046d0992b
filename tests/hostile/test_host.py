"""A hostile host through the real CLI over a real sshd (issue 14, points 1, 2, 6, 7).

A login banner (printed before every command of a dedicated sshd, via `ForceCommand`, so the shared
`~/.bashrc` of other test tiers is never touched), a state dir with a bad owner
or mode, a tampered, empty or PID-reusing pid file, a full disk (a tiny tmpfs the test mounts), an
unwritable state dir, a stop grace that formats as `1e-05`, and secrets in the local SSH log.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import ssh_keys, sshd  # noqa: F401  (fixtures)
from tests.support.hostile_cli import Done, assert_clean_failure, cli_env, run_cli
from tests.support.ports import free_port
from tests.support.sshd import TEST_HOME, TEST_USER, Keys, Sshd, make_dir

BANNER = "Welcome to hostile-box! specdash-stream-pid 1\nstarted 1 1 /nope\n"
"""What the login shell prints first: it even looks like the replies and the PID marker."""


class BannerSshd(Sshd):
    """An sshd whose sessions print `BANNER` before every command, as a chatty `~/.bashrc` does.

    By `ForceCommand banner.sh` (which prints, then runs `$SSH_ORIGINAL_COMMAND` in bash), so the shared
    `~/.bashrc` of the test user is never touched. (`SetEnv BASH_ENV=...` printed nothing: bash started by
    sshd reads `~/.bashrc` instead of `BASH_ENV`, so the banner tests tested nothing.)
    """

    def __init__(self, keys: Keys, banner: Path) -> None:
        super().__init__(keys, name="sshd-banner")
        self.banner = banner

    def _write_config(self) -> None:
        super()._write_config()
        with self.config.open("a") as f:
            f.write(f"ForceCommand {self.banner}\n")


@pytest.fixture(scope="module")
def banner_sshd(ssh_keys: Keys) -> Iterator[Sshd]:  # noqa: F811
    directory = make_dir("specdash-banner-")
    script = directory / "banner.sh"
    script.write_text("#!/bin/bash\n" + _printf(BANNER) + 'exec /bin/bash -c "$SSH_ORIGINAL_COMMAND"\n')
    script.chmod(0o755)
    server = BannerSshd(ssh_keys, script).start()
    assert server_prints_banner(server, ssh_keys), "the banner sshd prints no banner: the banner tests test nothing"
    yield server
    server.stop()
    shutil.rmtree(directory, ignore_errors=True)


def server_prints_banner(server: Sshd, keys: Keys) -> bool:
    """True when a plain `ssh HOST true` through `server` prints `BANNER` (the precondition of the banner tests)."""
    done = subprocess.run(
        ["ssh", "-F", "/dev/null", "-i", str(keys.client_key), "-p", str(server.port), "-o", "BatchMode=yes",
         "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", f"{TEST_USER}@127.0.0.1", "true"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    return BANNER in done.stdout


def _printf(text: str) -> str:
    return "printf '" + text.replace("'", "'\\''").replace("\n", "\\n") + "'\n"


def _uid() -> tuple[int, int]:
    entry = pwd.getpwnam(TEST_USER)
    return entry.pw_uid, entry.pw_gid


class Box:
    """One host entry (own state dir under the test user's home) and a CLI bound to it."""

    def __init__(
        self, tmp: Path, server: Sshd, keys: Keys, *, stop_timeout: float = 1.0, extra: str = "", script: str = ""
    ) -> None:
        self.token = "sleeper-" + uuid.uuid4().hex[:10]
        self.state_rel = f".specdash-hostile/{uuid.uuid4().hex[:10]}"
        self.state = TEST_HOME / self.state_rel
        self.home = tmp / "home"
        known = tmp / "known_hosts"
        known.write_text(server.known_hosts_line() + "\n")
        # Ignores SIGTERM (only SIGKILL ends it), prints two log lines, keeps a child in its group.
        script = script or "echo line-one; echo line-two; trap '' TERM; while :; do sleep 1; done"
        self.config = tmp / "config.toml"
        self.config.write_text(f"""
[hosts.box]
address = "{TEST_USER}@127.0.0.1:{server.port}"
identity_file = "{keys.client_key}"
known_hosts = "{known}"
state_dir = "~/{self.state_rel}"

[modes.sleeper]
engine = "sglang"
model = "/m"
port = {free_port()}
launcher = ["/bin/sh", "-c", {json.dumps(script)}, "{self.token}"]
stop_timeout = {stop_timeout}
{extra}
""")

    def cli(self, *argv: str, timeout: float = 120) -> Done:
        return run_cli(argv, self.home, self.config, timeout=timeout)

    def pids(self) -> list[int]:
        """Processes of this box's server still alive (found by the token in their command line)."""
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                    state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
                except OSError:
                    continue
                if self.token.encode() in cmdline and state != "Z":
                    found.append(int(entry))
        return found

    def run_dir(self) -> Path:
        return self.state / "runs" / (self.state / "current").read_text().strip()

    def cleanup(self) -> None:
        for pid in self.pids():
            os.kill(pid, 9)
        shutil.rmtree(self.state, ignore_errors=True)


@pytest.fixture
def box(tmp_path: Path, sshd: Sshd, ssh_keys: Keys) -> Iterator[Box]:  # noqa: F811
    b = Box(tmp_path, sshd, ssh_keys)
    yield b
    b.cleanup()


def _victim() -> subprocess.Popen[bytes]:
    """A process of the remote user that specdash did not start, in its own process group."""
    uid, gid = _uid()
    return subprocess.Popen(["sleep", "300"], user=uid, group=gid, start_new_session=True)


def test_login_banner_breaks_nothing(tmp_path: Path, banner_sshd: Sshd, ssh_keys: Keys) -> None:  # noqa: F811
    b = Box(tmp_path, banner_sshd, ssh_keys, stop_timeout=1)
    try:
        up = b.cli("up", "box", "--mode", "sleeper")
        assert up.code == 0, up.stderr
        assert "started sleeper" in up.stdout and "Traceback" not in up.stderr
        logs = b.cli("logs", "box", "-n", "5")
        assert logs.code == 0, logs.stderr
        assert logs.stdout.splitlines() == ["line-one", "line-two"]  # no banner, nothing shifted
        # `logs -f` streams: the banner printed before the stream's PID marker must not pass for it, nor
        # shift the follower's byte offset.
        follow = _follow(b, "line-two")
        assert follow[:2] == ["line-one", "line-two"], follow
        assert not any("hostile-box" in line or "specdash-stream-pid" in line for line in follow), follow
        down = b.cli("down", "box")
        assert down.code == 0, down.stderr
        assert "stopped run" in down.stdout and "ignored SIGTERM and were killed" in down.stdout
        assert b.pids() == []
    finally:
        b.cleanup()


def _follow(b: Box, last: str, timeout: float = 60.0) -> list[str]:
    """Run `specdash logs box -f` until it printed `last` (or `timeout`), then stop it; its stdout lines."""
    b.home.mkdir(parents=True, exist_ok=True)
    env = cli_env(b.home, b.config)
    if os.environ.get("SPECDASH_SRC_UNDER_TEST"):
        env["PYTHONPATH"] = os.environ["SPECDASH_SRC_UNDER_TEST"]
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "specdash", "logs", "box", "-f", "-n", "5"],
            stdout=out,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=b.home,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline and proc.poll() is None:
                out.seek(0)
                if last.encode() in out.read():
                    break
                time.sleep(0.1)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)
        out.seek(0)
        return out.read().decode(errors="replace").splitlines()


def test_tiny_grace_still_kills(tmp_path: Path, sshd: Sshd, ssh_keys: Keys) -> None:  # noqa: F811
    """stop_timeout = 0.00001 formatted as 1e-05 broke the script's arithmetic and skipped SIGKILL."""
    b = Box(tmp_path, sshd, ssh_keys, stop_timeout=0.00001)
    try:
        assert b.cli("up", "box", "--mode", "sleeper").code == 0
        down = b.cli("down", "box")
        assert down.code == 0, down.stderr
        assert b.pids() == []
        assert not (b.state / "current").exists()
    finally:
        b.cleanup()


def test_stop_after_the_leader_died_ends_members_whose_tag_reads_as_gone(
    tmp_path: Path,
    sshd: Sshd,  # noqa: F811
    ssh_keys: Keys,  # noqa: F811
) -> None:
    """vLLM's EngineCore and Worker set their process title (setproctitle), which overwrites what
    /proc/PID/environ shows: the run tag reads as gone. Once the API server (the group leader) is dead, the
    stop must still end them: they are in the run's group and their stdout is the run's log. Here a child
    started with `env -i` (no tag at all) stands for them; found with a real vLLM CPU engine (a Worker
    survived `down` after the API server was SIGKILLed)."""
    script = "env -i /bin/sh -c 'while :; do sleep 1; done' \"$0\" & echo up; while :; do sleep 1; done"
    b = Box(tmp_path, sshd, ssh_keys, script=script)
    try:
        assert b.cli("up", "box", "--mode", "sleeper").code == 0
        leader = int((b.run_dir() / "pid").read_text().split()[0])
        deadline = time.monotonic() + 30
        while len(b.pids()) < 2:  # the leader and its untagged child
            assert time.monotonic() < deadline, b.pids()
            time.sleep(0.05)
        child = next(p for p in b.pids() if p != leader)
        assert b"SPECDASH_RUN=" not in Path(f"/proc/{child}/environ").read_bytes()
        os.kill(leader, 9)
        down = b.cli("down", "box")
        assert down.code == 0, (down.stdout, down.stderr)
        assert b.pids() == [], "a member of the run's group survived the stop"
    finally:
        b.cleanup()


@pytest.mark.parametrize("how", ["mode-777", "group-writable", "owned-by-root"])
def test_unsafe_state_dir_is_refused(how: str, box: Box) -> None:
    uid, gid = _uid()
    box.state.mkdir(parents=True)
    os.chown(box.state.parent, uid, gid)
    if how == "owned-by-root":
        box.state.chmod(0o700)
    else:
        os.chown(box.state, uid, gid)
        box.state.chmod(0o777 if how == "mode-777" else 0o770)
    for argv in (("status", "box"), ("down", "box"), ("up", "box", "--mode", "sleeper")):
        done = box.cli(*argv)
        assert_clean_failure(done, 1, str(box.state), "refusing the state directory")
    assert box.pids() == []  # nothing was launched


@pytest.mark.parametrize("record", ["victim", "victim-reused-pid", "pgid-one", "empty", "garbage"])
def test_tampered_pid_file_signals_nothing_of_others(record: str, box: Box) -> None:
    up = box.cli("up", "box", "--mode", "sleeper")
    assert up.code == 0, up.stderr
    run_dir = box.run_dir()
    real = box.pids()
    assert real
    victim = _victim()
    try:
        pid_file = run_dir / "pid"
        fields = pid_file.read_text().split()
        # The fields after pid and pgid are kept as the code under test wrote them (their number too), so the
        # same case runs against an older record format (`SPECDASH_SRC_UNDER_TEST`): it tests the defect, not
        # the format.
        if record == "victim":  # the victim's pid and group, a kernel start time that cannot be its own
            text = " ".join([str(victim.pid), str(victim.pid), *fields[2:3], *["1" for _ in fields[3:]]]) + "\n"
        elif record == "victim-reused-pid":  # a dead run's pid, reused by the victim (start time differs)
            text = " ".join([str(victim.pid), str(victim.pid), *fields[2:]]) + "\n"
        elif record == "pgid-one":
            text = " ".join(["1", "1", *fields[2:3], *["1" for _ in fields[3:]]]) + "\n"
        elif record == "empty":  # a full disk at launch
            text = ""
        else:
            text = "\x00\x01 garbage -- -1\n"
        pid_file.write_text(text)
        status = box.cli("status", "box")
        assert "Traceback" not in status.stderr and "internal error" not in status.stderr, status.stderr
        down = box.cli("down", "box")
        assert "Traceback" not in down.stderr and "internal error" not in down.stderr, down.stderr
        assert victim.poll() is None, "down signalled a process specdash did not start"
        if record in ("empty", "garbage", "pgid-one"):  # damaged: said so, never "nothing to stop" (issue 29.4)
            assert_clean_failure(down, 1, "damaged")
            assert "pid 0" not in status.stdout and "damaged" in status.stdout, status.stdout
            assert box.pids() == real, "down signalled the run of a damaged record"
        # A new `up` is not blocked forever by the broken record.
        for pid in box.pids():
            os.kill(pid, 9)
        again = box.cli("up", "box", "--mode", "sleeper")
        assert again.code == 0, again.stderr
    finally:
        victim.kill()
        victim.wait()


def test_full_disk_at_launch(box: Box) -> None:
    uid, gid = _uid()
    box.state.mkdir(parents=True)
    os.chown(box.state.parent, uid, gid)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size=64k,uid={uid},gid={gid},mode=0700", "tmpfs", str(box.state)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    try:
        (box.state / "runs").mkdir()
        os.chown(box.state / "runs", uid, gid)
        (box.state / "runs").chmod(0o700)
        filler = box.state / "filler"
        with pytest.raises(OSError), filler.open("wb", buffering=0) as f:
            while True:
                f.write(b"\0" * 4096)
        done = box.cli("up", "box", "--mode", "sleeper")
        assert_clean_failure(done, 1, "cannot write the run record", "nothing was left running")
        assert box.pids() == []
        filler.unlink()
        status = box.cli("status", "box")
        assert status.code == 0 and "Traceback" not in status.stderr, status.stderr
    finally:
        subprocess.run(["umount", "-l", str(box.state)], check=False)


def test_unwritable_state_dir(box: Box) -> None:
    box.state.mkdir(parents=True, mode=0o755)  # owned by root: the remote user cannot create runs/
    done = box.cli("up", "box", "--mode", "sleeper")
    assert done.code == 1 and "Traceback" not in done.stderr, done.stderr
    assert str(box.state) in done.stderr
    assert box.pids() == []


def test_secrets_stay_out_of_the_local_ssh_log(tmp_path: Path, sshd: Sshd, ssh_keys: Keys) -> None:  # noqa: F811
    """Secrets by name and by shape (issue 29 point 3) stay out of the local ssh.log and the host's run record."""
    b = Box(tmp_path, sshd, ssh_keys, stop_timeout=1)
    args = [
        "--api-key",
        "sk-TOPSECRET-1",
        "--hf-token=hf_TOPSECRET_2",
        "--speculative-config",
        json.dumps({"method": "EAGLE", "api_key": "TOPSECRET-json"}),
        "--url",
        "http://127.0.0.1:9/v1?token=TOPSECRET-query&x=1",
        "-k",
        "TOPSECRET-short",
        "--passphrase",
        "TOPSECRET phrase",
        "--innocent",
        "hf_TOPSECRETabcdefghijklmnopqrstuvwxyz",  # by shape alone
        "--also-innocent",
        "ghp_TOPSECRETabcdefghijklmnopqrstuvwxyz0",
    ]
    env = {"HF_TOKEN": "hf_TOPSECRET_3", "DB_PASS": "TOPSECRET-db", "NGC_KEY": "TOPSECRET-ngc", "OTHER": "fine"}
    env_toml = ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items())
    text = b.config.read_text().replace(
        "stop_timeout", f"args = {json.dumps(args)}\nenv = {{ {env_toml} }}\nstop_timeout"
    )
    b.config.write_text(text)
    try:
        assert b.cli("up", "box", "--mode", "sleeper").code == 0
        record = (b.run_dir() / "run.json").read_text()
        assert "TOPSECRET" not in record, record
        assert "EAGLE" in record  # the rest of the JSON argument is kept
        assert b.cli("down", "box").code == 0
        logs = list((b.home / "xdg_state_home").rglob("ssh.log*"))
        assert logs, "no ssh.log written"
        for log in logs:
            body = log.read_text()
            assert "TOPSECRET" not in body, [line for line in body.splitlines() if "TOPSECRET" in line]
            assert log.stat().st_mode & 0o077 == 0
        assert "Command:" in "".join(log.read_text() for log in logs)  # the commands are still logged
        assert (b.home / "xdg_state_home" / "specdash" / "log").stat().st_mode & 0o077 == 0
    finally:
        b.cleanup()


ODD_NAMES = {
    "space": "with space",
    "newline": "new\nline",
    "quotes": 'it\'s "quoted"',
    "dollar": "$HOME`id`$(id)",
    "carriage-return": "cr\rreturn",
    "escape": "esc\x1b[31mred\x07",
    "line-separator": "ls\u2028ps\x1c",
    "backslash-n": "back\\nslash\\",
    "trailing-newline-and-space": "ends-with\n ",
}
"""State dir names (the log path and every record path under it) that a line-by-line reply parser, a shell
word split or a terminal would get wrong."""
_CONTROL_CHARS = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def _toml_string(text: str) -> str:
    return json.dumps(text)  # a JSON string with \\uXXXX escapes is a TOML basic string


@pytest.mark.parametrize("name", list(ODD_NAMES))
def test_odd_state_dir_path(name: str, box: Box) -> None:
    """up / status / logs / down with a state dir (hence the log path) holding a newline, quotes, `$`, a CR...:
    the framed replies stay parseable, and anything printed shows the path escaped, never raw controls."""
    odd = f".specdash-hostile/{uuid.uuid4().hex[:6]}/{ODD_NAMES[name]}"
    box.config.write_text(box.config.read_text().replace(_toml_string(f"~/{box.state_rel}"), _toml_string(f"~/{odd}")))
    assert _toml_string(f"~/{odd}") in box.config.read_text()
    box.state_rel, box.state = odd, TEST_HOME / odd
    try:
        up = box.cli("up", "box", "--mode", "sleeper")
        assert up.code == 0, up.stderr
        assert box.pids(), "nothing was launched"
        assert (box.state / "current").is_file()
        status = box.cli("status", "box")
        assert status.code == 0 and "sleeper" in status.stdout, (status.stdout, status.stderr)
        logs = box.cli("logs", "box", "-n", "5")
        assert logs.code == 0, logs.stderr
        assert logs.stdout.splitlines() == ["line-one", "line-two"]
        down = box.cli("down", "box")
        assert down.code == 0 and "stopped run" in down.stdout, (down.stdout, down.stderr)
        assert box.pids() == []
        for done in (up, status, logs, down):
            assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
            for line in (done.stdout + done.stderr).splitlines():
                assert not _CONTROL_CHARS.search(line.replace("\r", "")), repr(line)
    finally:
        box.cleanup()
        shutil.rmtree(box.state.parent, ignore_errors=True)


def test_tampered_current_pointer_with_odd_bytes(box: Box) -> None:
    """`current` naming a run with a newline and non-UTF-8 bytes: status and down say so by name (escaped)
    or find nothing, and a new `up` still works."""
    up = box.cli("up", "box", "--mode", "sleeper")
    assert up.code == 0, up.stderr
    for pid in box.pids():
        os.kill(pid, 9)
    odd = b"run\xff\xfe\nsecond\x1b[2J"
    (box.state / "runs").joinpath(os.fsdecode(odd)).mkdir()
    (box.state / "current").write_bytes(odd + b"\n")
    uid, gid = _uid()
    for path in (box.state / "runs" / os.fsdecode(odd), box.state / "current"):
        os.chown(path, uid, gid)
    for argv in (("status", "box"), ("down", "box")):
        done = box.cli(*argv)
        assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
        assert done.code in (0, 1), (done.code, done.stderr)
        assert "\x1b" not in done.stdout + done.stderr and "\ufffd" not in done.stdout, (done.stdout, done.stderr)
    again = box.cli("up", "box", "--mode", "sleeper")
    assert again.code == 0, again.stderr
