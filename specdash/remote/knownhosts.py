"""Host-key policy on top of asyncssh's known_hosts check: name unknown and changed keys, or accept new ones.

asyncssh verifies the server's key against the known_hosts files we give it. When the key is not among the
trusted ones it asks the client object (`SSHClient.validate_host_public_key`), and `HostKeyPolicy.check`
answers there: if any known_hosts line matches the host the key has *changed* (always refused); if none
does the host is *unknown*, refused unless the user asked for OpenSSH's `StrictHostKeyChecking=accept-new`,
in which case the key the server presented in this very handshake is appended as a `[host]:port key` line.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from specdash.errors import UsageError
from specdash.limits import MAX_KNOWN_HOSTS_BYTES, read_regular_file
from specdash.remote.ssherror import SSHError, SSHErrorKind
from specdash.remote.sshlib import asyncssh
from specdash.safetext import escape_controls

log = logging.getLogger(__name__)

DEFAULT_PORT = 22
GLOBAL_KNOWN_HOSTS = Path("/etc/ssh/ssh_known_hosts")


def read_known_hosts(files: list[Path]) -> asyncssh.SSHKnownHosts:
    """The trusted keys of `files` (missing ones skipped), read by us rather than by asyncssh so that a damaged
    file is named as OpenSSH names it, `FILE:LINE: what is wrong`, instead of failing on a raw
    `UnicodeDecodeError`. Each file at most `MAX_KNOWN_HOSTS_BYTES`.

    Raises:
        SSHError: (`CONFIG`, permanent) for a file that cannot be read, or a line that is not UTF-8 or no
            known_hosts entry.
    """
    texts: list[str] = []
    for path in files:
        try:
            data = read_regular_file(path, MAX_KNOWN_HOSTS_BYTES, "known_hosts file")
        except FileNotFoundError:
            continue
        except UsageError as exc:
            raise SSHError(SSHErrorKind.CONFIG, str(exc)) from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            number = data.count(b"\n", 0, exc.start) + 1
            column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
            raise SSHError(
                SSHErrorKind.CONFIG,
                f"{path}:{number}: not a known_hosts line (bytes that are not UTF-8 at column {column}); "
                "fix or remove that line",
            ) from None
        try:
            asyncssh.import_known_hosts(text)
        except (ValueError, asyncssh.KeyImportError):
            for number, line in enumerate(text.splitlines(), 1):  # only to name the line: asyncssh does not
                try:
                    asyncssh.import_known_hosts(line)
                except (ValueError, asyncssh.KeyImportError) as exc:
                    shown = escape_controls(str(exc))[:200]
                    message = f"{path}:{number}: bad known_hosts line ({shown}); fix or remove it"
                    raise SSHError(SSHErrorKind.CONFIG, message) from None
            raise SSHError(SSHErrorKind.CONFIG, f"{path}: not a known_hosts file") from None
        texts.append(text)
    return asyncssh.import_known_hosts("\n".join(texts))


def host_pattern(host: str, port: int) -> str:
    """The known_hosts name for a host: `host` on port 22, else `[host]:port` (as OpenSSH writes it)."""
    return host if port == DEFAULT_PORT else f"[{host}]:{port}"


def known_hosts_line(host: str, port: int, key: asyncssh.SSHKey) -> str:
    """A known_hosts line (without newline) for `key`, comment stripped."""
    algorithm, blob = key.export_public_key("openssh").decode().split()[:2]
    return f"{host_pattern(host, port)} {algorithm} {blob}"


def find_host_lines(files: list[Path], host: str, addr: str, port: int) -> list[tuple[Path, int]]:
    """Every (file, 1-based line number) whose host key entry matches the host, as asyncssh matches it.

    Marker lines (`@cert-authority`, `@revoked`) and lines asyncssh cannot parse are skipped.
    """
    found: list[tuple[Path, int]] = []
    for path in files:
        try:
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            continue
        for number, line in enumerate(lines, start=1):
            entry = line.strip()
            if not entry or entry.startswith(("#", "@")):
                continue
            try:
                # One-line SSHKnownHosts objects reuse asyncssh's own matching (hashed names, wildcards,
                # negation, its fallback to a port-less entry), so we blame exactly the line it used.
                keys = asyncssh.import_known_hosts(entry).match(host, addr, None if port == DEFAULT_PORT else port)[0]
            except (ValueError, asyncssh.KeyImportError):
                continue
            if keys:
                found.append((path, number))
    return found


def append_known_host(path: Path, host: str, port: int, key: asyncssh.SSHKey) -> None:
    """Append the host's key to a known_hosts file, creating it (and `~/.ssh`-like parents, 0700) if needed."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a") as out:
        # Start on a fresh line even if someone left the file without a trailing newline.
        if out.tell() > 0 and not path.read_bytes().endswith(b"\n"):
            out.write("\n")
        out.write(known_hosts_line(host, port, key) + "\n")


@dataclass
class HostKeyProblem:
    """Why a host key was refused, kept for the error message."""

    verdict: Literal["unknown", "changed"]
    """`unknown`: no known_hosts entry for the host; `changed`: entries exist but none has this key."""
    host: str
    """Host name as matched against known_hosts (after `~/.ssh/config` HostName)."""
    port: int
    """Port as matched against known_hosts."""
    key_type: str
    """Algorithm of the key the server presented, e.g. `ssh-ed25519`."""
    fingerprint: str
    """SHA256 fingerprint of the presented key, as `ssh-keygen -l` prints it."""
    files: list[Path]
    """The known_hosts files that were consulted."""
    matches: list[tuple[Path, int]] = field(default_factory=list)
    """For `changed`: the offending (file, line number) entries."""
    write_error: str | None = None
    """For `unknown` with accept-new: why the key could not be recorded."""

    def message(self) -> str:
        """A human message in the spirit of OpenSSH's."""
        name = host_pattern(self.host, self.port)
        presented = f"{self.key_type} key {self.fingerprint}"
        if self.verdict == "changed":
            where = ", ".join(f"{path}:{line}" for path, line in self.matches)
            first = self.matches[0][0]
            return (
                f"REMOTE HOST IDENTIFICATION HAS CHANGED for {name}! Someone could be eavesdropping on you "
                f"right now (man-in-the-middle attack), or the host key has just been changed. The server sent "
                f"{presented}, which does not match the key in {where}. Refusing to connect. If the change is "
                f"expected, remove the old entry with: ssh-keygen -R '{name}' -f {first}"
            )
        files = ", ".join(str(path) for path in self.files) or "(no known_hosts file)"
        if self.write_error:
            return f"host key for {name} ({presented}) not accepted: cannot record it in {self.write_error}"
        return (
            f"host key for {name} is unknown: the server sent {presented}, and {files} has no entry for it. "
            f"Check the fingerprint, then connect once with accept-new (OpenSSH's "
            f"StrictHostKeyChecking=accept-new) to record it."
        )


class HostKeyPolicy:
    """Decides on keys asyncssh did not find trusted; one instance per connection attempt.

    Args:
        files: known_hosts files to consult; the first one is where accept-new writes.
        accept_new: Trust and record a key for a host that has no entry at all (never for a changed one).
    """

    def __init__(self, files: list[Path], *, accept_new: bool) -> None:
        self.files = files
        self.accept_new = accept_new
        self.problem: HostKeyProblem | None = None
        """Set when a key was refused; read after the connection attempt failed."""
        self.accepted: str | None = None
        """The known_hosts line written by accept-new, if any."""

    def asyncssh_known_hosts(self) -> asyncssh.SSHKnownHosts:
        """The `known_hosts=` argument for asyncssh: the existing files, or an explicitly empty list.

        An empty value would make asyncssh fall back to `~/.ssh/known_hosts`, which is not what an override
        to a missing file means, so "no files" is passed as an empty `SSHKnownHosts`.
        """
        return read_known_hosts(self.files)

    def check(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        """asyncssh's `validate_host_public_key` hook: True to trust `key`."""
        matches = find_host_lines(self.files, host, addr, port)
        verdict: Literal["unknown", "changed"] = "changed" if matches else "unknown"
        write_error = None
        if verdict == "unknown" and self.accept_new:
            try:
                append_known_host(self.files[0], host, port, key)
            except OSError as exc:
                # Refuse rather than trust a key we could not record: the next connect would ask again.
                write_error = f"{self.files[0]}: {exc.strerror or exc}"
            else:
                self.accepted = known_hosts_line(host, port, key)
                log.warning("accept-new: added %s to %s", self.accepted, self.files[0])
                return True
        self.problem = HostKeyProblem(
            verdict=verdict,
            host=host,
            port=port,
            key_type=key.get_algorithm(),
            fingerprint=key.get_fingerprint(),
            files=self.files,
            matches=matches,
            write_error=write_error,
        )
        return False
