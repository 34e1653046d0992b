"""A real OpenSSH `sshd` on loopback for tests (and benchmarks): keys, a test user, start/stop by PID.

Reusable beyond the SSH layer's own tests: a second sshd as a jump host, one inside a network namespace
(`netns=`), the simulator run as `TEST_USER`. Recipe and pitfalls: reference/environment.md section 2.

Everything is stopped by PID (from sshd's PidFile, and the sessions it forked), never by name.
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.ports import free_port

SSHD = Path("/usr/sbin/sshd")
TEST_USER = "specdash-test"
"""A dedicated unprivileged account with a clean home: root's shell start-up (pyenv) costs 130+ ms."""
TEST_HOME = Path("/home") / TEST_USER
"""Persists across tests and sessions; later tiers run the simulator there."""


def skip_reason() -> str | None:
    """Why a real sshd cannot run here, or None when it can."""
    if os.geteuid() != 0:
        return "needs root: the sshd tests create the user specdash-test and run /usr/sbin/sshd"
    if not SSHD.exists():
        return f"{SSHD} missing (make test installs openssh-server)"
    if shutil.which("ssh-keygen") is None:
        return "ssh-keygen missing (openssh-client)"
    return None


USER_LOCK = Path("/tmp/specdash-test-user.lock")
"""Held while the test user is looked up or created. Concurrent `useradd`s of one name are not safe: on a fresh
machine, six workers creating the user at once left it with uid 1004 or 1006 while some workers had read 1001
to 1003 and the home's files were owned by 1001 (reproduced five times in five rounds); the first tests then
failed with "cannot write the run record"."""


def ensure_test_user() -> pwd.struct_passwd:
    """Create `TEST_USER` with a real home if missing (idempotent; one creator at a time, across processes)."""
    with USER_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        try:
            entry = pwd.getpwnam(TEST_USER)
        except KeyError:
            made = subprocess.run(
                ["useradd", "--create-home", "--home-dir", str(TEST_HOME), "--shell", "/bin/bash", TEST_USER],
                capture_output=True,
                text=True,
            )
            try:
                entry = pwd.getpwnam(TEST_USER)
            except KeyError:
                raise RuntimeError(f"useradd {TEST_USER} failed: {made.stderr.strip()}") from None
        # useradd leaves the account locked ("!"), and with UsePAM no sshd refuses locked accounts.
        shadow = subprocess.run(["getent", "shadow", TEST_USER], capture_output=True, text=True).stdout
        if shadow.split(":")[1:2] != ["*"]:
            subprocess.run(["usermod", "-p", "*", TEST_USER], check=True, capture_output=True)
        home = Path(entry.pw_dir)
        home.mkdir(mode=0o755, exist_ok=True)
        if home.stat().st_uid != entry.pw_uid:  # a home left by an earlier user of this name: make it the user's
            subprocess.run(["chown", "-R", f"{entry.pw_uid}:{entry.pw_gid}", str(home)], check=True)
        os.chown(home, entry.pw_uid, entry.pw_gid)
        return entry


def make_dir(prefix: str) -> Path:
    """A root-owned 0755 temp dir: sshd reads AuthorizedKeysFile as the user, so every parent must be
    traversable by it (pytest's tmp_path is under a 0700 directory)."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    path.chmod(0o755)
    return path


def keygen(path: Path, comment: str) -> str:
    """Generate an ed25519 key pair at `path` (+ `.pub`); return the public key line."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        capture_output=True,
    )
    return path.with_suffix(".pub").read_text().strip()


@dataclass(frozen=True)
class Keys:
    """Host and client keys for test servers."""

    dir: Path
    """Where they live (0755, root-owned)."""
    host_key: Path
    """sshd host private key."""
    host_pub: str
    """Its public key line (`ssh-ed25519 AAAA... comment`)."""
    client_key: Path
    """Client private key, authorised for `TEST_USER`."""
    other_key: Path
    """Client private key that is *not* authorised (auth-failure tests)."""
    authorized_keys: Path
    """AuthorizedKeysFile for the servers (0644)."""

    def with_own_host_key(self, directory: Path) -> Keys:
        """The same client keys, with a fresh host key in `directory` (for tests that change host keys
        without disturbing servers that share these keys)."""
        host_pub = keygen(directory / "host_ed25519", "specdash-test-host-2")
        return dataclasses.replace(self, dir=directory, host_key=directory / "host_ed25519", host_pub=host_pub)

    @classmethod
    def create(cls, directory: Path) -> Keys:
        host_pub = keygen(directory / "host_ed25519", "specdash-test-host")
        client_pub = keygen(directory / "client_ed25519", "specdash-test-client")
        keygen(directory / "other_ed25519", "specdash-test-other")
        authorized = directory / "authorized_keys"
        authorized.write_text(client_pub + "\n")
        authorized.chmod(0o644)
        return cls(
            directory,
            directory / "host_ed25519",
            host_pub,
            directory / "client_ed25519",
            directory / "other_ed25519",
            authorized,
        )


def socket_owners(local_port: int) -> list[int]:
    """PIDs of the processes holding an established TCP socket with local port `local_port` (via `ss`)."""
    out = subprocess.run(
        ["ss", "-Htnp", "state", "established", "src", f"127.0.0.1:{local_port}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [int(part.split(",")[0]) for part in out.split("pid=")[1:]]


def _children(pid: int) -> list[int]:
    kids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Fields after the ")" that closes the command name: state, ppid, ...
        if int(stat.rpartition(")")[2].split()[1]) == pid:
            kids.append(int(entry.name))
    return kids


def _comm(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "comm").read_text().strip()
    except OSError:
        return ""


class Sshd:
    """One sshd process on loopback, configured per reference/environment.md section 2.

    Args:
        keys: Host key and AuthorizedKeysFile to use.
        name: Distinguishes config, pid and log files of several servers sharing `keys.dir`.
        port: Fixed port (e.g. to restart on the same one); default: a free one.
        listen: Address to listen on.
        max_sessions: sshd's MaxSessions (10 is OpenSSH's default, kept so the cap is tested for real).
        log_level: sshd LogLevel.
        netns: Run inside this network namespace (`ip netns exec`).
        set_env: Environment of every session (`SetEnv`: e.g. a PATH with a fake `python3` first).
    """

    def __init__(
        self,
        keys: Keys,
        *,
        name: str = "sshd",
        port: int | None = None,
        listen: str = "127.0.0.1",
        max_sessions: int = 10,
        log_level: str = "INFO",
        netns: str | None = None,
        set_env: dict[str, str] | None = None,
    ) -> None:
        self.keys = keys
        self.set_env = dict(set_env or {})
        self.name = name
        self.listen = listen
        self.port = port or free_port(listen)
        self.max_sessions = max_sessions
        self.log_level = log_level
        self.netns = netns
        self.config = keys.dir / f"{name}.conf"
        self.pidfile = keys.dir / f"{name}.pid"
        self.log = keys.dir / f"{name}.log"
        self._proc: subprocess.Popen[bytes] | None = None

    def known_hosts_line(self) -> str:
        """The known_hosts line for this server (`[addr]:port type key`)."""
        return f"[{self.listen}]:{self.port} " + " ".join(self.keys.host_pub.split()[:2])

    def log_text(self) -> str:
        """What sshd logged so far (stderr, `-e`)."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def _write_config(self) -> None:
        self.config.write_text(
            "\n".join(
                [
                    f"Port {self.port}",
                    f"ListenAddress {self.listen}",
                    f"HostKey {self.keys.host_key}",
                    f"PidFile {self.pidfile}",
                    f"AuthorizedKeysFile {self.keys.authorized_keys}",
                    f"AllowUsers {TEST_USER}",
                    "PermitRootLogin no",
                    "PubkeyAuthentication yes",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "UsePAM no",
                    "StrictModes no",
                    "AllowTcpForwarding yes",
                    f"MaxSessions {self.max_sessions}",
                    "MaxStartups 100:30:200",
                    f"LogLevel {self.log_level}",
                    # One line: sshd takes the first SetEnv line only (a second one would be ignored).
                    *([" ".join(["SetEnv", *(f'"{k}={v}"' for k, v in self.set_env.items())])] if self.set_env else []),
                    "",
                ]
            )
        )

    def start(self, timeout: float = 10.0) -> Sshd:
        """Start sshd and return once it accepts TCP connections."""
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation dir, else sshd refuses
        self._write_config()
        self.pidfile.unlink(missing_ok=True)
        command = [str(SSHD), "-D", "-e", "-f", str(self.config)]
        if self.netns:
            command = ["ip", "netns", "exec", self.netns, *command]
        with self.log.open("ab") as log:
            self._proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:  # an external process: poll with a deadline
            if self._proc.poll() is not None:
                raise RuntimeError(f"sshd exited with {self._proc.returncode}:\n{self.log_text()[-2000:]}")
            if self.pidfile.exists() and self._accepts():
                return self
            time.sleep(0.01)
        raise TimeoutError(f"sshd on {self.listen}:{self.port} not ready after {timeout} s:\n{self.log_text()}")

    def _accepts(self) -> bool:
        if self.netns:
            return True  # the port is in another namespace; the PidFile is written after bind
        try:
            with socket.create_connection((self.listen, self.port), timeout=0.5):
                return True
        except OSError:
            return False

    @property
    def pid(self) -> int:
        """The listener's PID, from its PidFile."""
        return int(self.pidfile.read_text().split()[0])

    def session_pids(self) -> list[int]:
        """PIDs of the sshd processes serving connections (not the users' commands)."""
        found: list[int] = []
        todo = [self.pid]
        while todo:
            for kid in _children(todo.pop()):
                if _comm(kid) in ("sshd", "sshd-session"):
                    found.append(kid)
                    todo.append(kid)
        return found

    def signal_sessions(self, sig: signal.Signals) -> list[int]:
        """Send `sig` to every session process (e.g. SIGSTOP to make the server unresponsive)."""
        pids = self.session_pids()
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        return pids

    def stop(self, timeout: float = 5.0) -> None:
        """Kill the sessions (SIGKILL: the connections drop at once) and the listener, by PID."""
        if self._proc is None or self._proc.poll() is not None:
            return
        # Sessions first: killing only the listener leaves established connections up.
        self.signal_sessions(signal.SIGCONT)
        self.signal_sessions(signal.SIGKILL)
        os.kill(self.pid, signal.SIGTERM)
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.pid, signal.SIGKILL)
            self._proc.wait(timeout)
