"""A hostile host through the real CLI over a real sshd (issue 14, points 1, 2, 6, 7).

A login banner (printed by the test user's shell for every session of a dedicated sshd, via `SetEnv
BASH_ENV`, so the shared `~/.bashrc` of other test tiers is never touched), a state dir with a bad owner
or mode, a tampered, empty or PID-reusing pid file, a full disk (a tiny tmpfs the test mounts), an
unwritable state dir, a stop grace that formats as `1e-05`, and secrets in the local SSH log.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hostile.cli import Done, assert_clean_failure, run_cli
from tests.integration.conftest import ssh_keys, sshd  # noqa: F401  (fixtures)
from tests.sshd import TEST_HOME, TEST_USER, Keys, Sshd, free_port, make_dir

BANNER = "Welcome to hostile-box! specdash-stream-pid 1\nstarted 1 1 /nope\n"
"""What the login shell prints first: it even looks like the replies and the PID marker."""


class BannerSshd(Sshd):
    """An sshd whose sessions run `BASH_ENV=banner.sh`: every non-interactive bash prints `BANNER`."""

    def __init__(self, keys: Keys, banner: Path) -> None:
        super().__init__(keys, name="sshd-banner")
        self.banner = banner

    def _write_config(self) -> None:
        super()._write_config()
        with self.config.open("a") as f:
            f.write(f"SetEnv BASH_ENV={self.banner}\n")


@pytest.fixture(scope="module")
def banner_sshd(ssh_keys: Keys) -> Iterator[Sshd]:  # noqa: F811
    directory = make_dir("specdash-banner-")
    script = directory / "banner.sh"
    script.write_text(_printf(BANNER))
    script.chmod(0o644)
    server = BannerSshd(ssh_keys, script).start()
    yield server
    server.stop()
    shutil.rmtree(directory, ignore_errors=True)


def _printf(text: str) -> str:
    return "printf '" + text.replace("'", "'\\''").replace("\n", "\\n") + "'\n"


def _uid() -> tuple[int, int]:
    entry = pwd.getpwnam(TEST_USER)
    return entry.pw_uid, entry.pw_gid


class Box:
    """One host entry (own state dir under the test user's home) and a CLI bound to it."""

    def __init__(
        self, tmp: Path, server: Sshd, keys: Keys, *, stop_timeout: float = 5.0, extra: str = "", script: str = ""
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
        down = b.cli("down", "box")
        assert down.code == 0, down.stderr
        assert "stopped run" in down.stdout and "ignored SIGTERM and were killed" in down.stdout
        assert b.pids() == []
    finally:
        b.cleanup()


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
        if record == "victim":  # the victim's pid and group, a start time that cannot be its own
            text = f"{victim.pid} {victim.pid} {fields[2]} 1\n"
        elif record == "victim-reused-pid":  # a dead run's pid, reused by the victim (start time differs)
            text = f"{victim.pid} {victim.pid} {fields[2]} {fields[3]}\n"
        elif record == "pgid-one":
            text = f"1 1 {fields[2]} 1\n"
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
        if record in ("empty", "garbage", "pgid-one"):
            assert down.code == 0 and "Nothing to stop" in down.stdout, (down.code, down.stdout, down.stderr)
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
    b = Box(tmp_path, sshd, ssh_keys, stop_timeout=1)
    text = b.config.read_text().replace(
        "stop_timeout", 'args = ["--api-key", "sk-TOPSECRET-1", "--hf-token=hf_TOPSECRET_2"]\n'
        'env = { HF_TOKEN = "hf_TOPSECRET_3", OTHER = "fine" }\nstop_timeout'
    )  # fmt: skip
    b.config.write_text(text)
    try:
        assert b.cli("up", "box", "--mode", "sleeper").code == 0
        assert b.cli("down", "box").code == 0
        logs = list((b.home / "xdg_state_home").rglob("ssh.log*"))
        assert logs, "no ssh.log written"
        for log in logs:
            body = log.read_text()
            assert "TOPSECRET" not in body
            assert log.stat().st_mode & 0o077 == 0
        assert "Command:" in "".join(log.read_text() for log in logs)  # the commands are still logged
        assert (b.home / "xdg_state_home" / "specdash" / "log").stat().st_mode & 0o077 == 0
    finally:
        b.cleanup()
