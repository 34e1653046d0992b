"""One connection attempt: SSH config, jump chain, known_hosts policy, and errors in human words.

`Connector.open()` resolves the target through the OpenSSH client config (asyncssh reads it: HostName,
User, Port, IdentityFile, ProxyJump, UserKnownHostsFile), connects each jump host itself (so jumps get the
same known_hosts policy, keys and error naming as the target), then the target through them. Every
`OSError` / `asyncssh.Error` leaves as an `SSHError` naming host:port and the reason.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from specdash.errors import UsageError
from specdash.limits import LOG_BACKUPS, LOG_MAX_BYTES
from specdash.paths import log_dir
from specdash.redact import redact_command
from specdash.remote.knownhosts import GLOBAL_KNOWN_HOSTS, HostKeyPolicy
from specdash.remote.options import SSHOptions
from specdash.remote.ssherror import SSHError, SSHErrorKind
from specdash.remote.sshlib import asyncssh
from specdash.target import Target, parse_target

DEFAULT_KEY_FILES = ("id_rsa", "id_ecdsa", "id_ecdsa_sk", "id_ed25519", "id_ed25519_sk", "id_dsa")
"""What OpenSSH (and asyncssh) offer from `~/.ssh` when neither `-i` nor IdentityFile says otherwise."""


class _RedactSecrets(logging.Filter):
    """Rewrites each record with its secrets redacted (`redact_command`: asyncssh logs every remote command
    line at INFO, launch args and `HF_TOKEN=...` environment words included) before it is written."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact_command(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


class _SpecdashLogHandler(logging.handlers.RotatingFileHandler):
    """The local SSH log: secrets redacted, 0600, rotated at `LOG_MAX_BYTES` (`LOG_BACKUPS` kept).

    Also marks the handler we installed, so a second `SSHHost` replaces it instead of adding another.
    """

    def __init__(self, path: Path) -> None:
        super().__init__(path, maxBytes=LOG_MAX_BYTES, backupCount=LOG_BACKUPS, delay=True, encoding="utf-8")
        self.addFilter(_RedactSecrets())

    def _open(self):  # type: ignore[no-untyped-def]
        # Created 0600 whatever the umask (logging opens with the default mode).
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.fchmod(fd, 0o600)
        return open(fd, self.mode, encoding=self.encoding, errors=self.errors)  # noqa: SIM115


def route_asyncssh_logging(path: Path | None = None) -> Path:
    """Send asyncssh's and this package's log records to a file, never to the terminal.

    Without a handler, records of WARNING and above would reach stderr through logging's last resort,
    right over the Textual screen.

    Args:
        path: Log file; default `log_dir() / "ssh.log"`.

    Returns:
        The log file path.
    """
    path = path or log_dir() / "ssh.log"
    loggers = [logging.getLogger(name) for name in ("asyncssh", "specdash.remote")]
    # One handler for both loggers: two rotating handlers on one file would each rotate it under the other,
    # whose records then go on into the renamed backup.
    ours = [h for logger in loggers for h in logger.handlers if isinstance(h, _SpecdashLogHandler)]
    handler = next((h for h in ours if h.baseFilename == str(path.absolute())), None)
    if handler is None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        handler = _SpecdashLogHandler(path)
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    for logger in loggers:
        logger.propagate = False
        logger.setLevel(logging.INFO)
        for old in [h for h in logger.handlers if isinstance(h, _SpecdashLogHandler) and h is not handler]:
            logger.removeHandler(old)
            old.close()
        if handler not in logger.handlers:
            logger.addHandler(handler)
    return path


class SessionClient(asyncssh.SSHClient):
    """Per-connection asyncssh client: host-key decisions and why the connection ended."""

    lost: Exception | None
    """What ended the connection (None: closed cleanly by the server or by us)."""

    def __init__(self, policy: HostKeyPolicy) -> None:
        self.policy = policy
        self.lost: Exception | None = None
        self.reached = False
        """The TCP connection was made (asyncssh calls `connection_made` then, before any SSH byte)."""

    def connection_made(self, conn: asyncssh.SSHClientConnection) -> None:
        self.reached = True

    def validate_host_public_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        return self.policy.check(host, addr, port, key)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = exc

    def reason(self) -> str:
        """Why the connection ended, for `Lost` events."""
        return str(self.lost) if self.lost else "the server closed the connection"


@dataclass
class Link:
    """One live connection and the jump connections it is tunnelled through."""

    conn: asyncssh.SSHClientConnection
    """The connection to the target."""
    client: SessionClient
    """Its asyncssh client object."""
    jumps: list[asyncssh.SSHClientConnection]
    """Jump connections, first hop first."""

    def close(self) -> None:
        """Close the connection, then its jumps (asyncssh does not close a tunnel we passed in)."""
        for conn in (self.conn, *reversed(self.jumps)):
            conn.close()


def _oserror_reason(exc: OSError) -> str:
    # asyncio words refusals as "Connect call failed ('127.0.0.1', 1)"; the errno says it better.
    return os.strerror(exc.errno) if exc.errno else str(exc)


def _config_list(resolved: asyncssh.SSHClientConnectionOptions, key: str) -> list[str]:
    value = resolved.config.get(key)
    return [str(item) for item in value] if isinstance(value, list | tuple) else []


def parse_jumps(chain: str) -> list[Target]:
    """Parse a `-J`/ProxyJump chain `hop1,hop2,...` (each `[user@]host[:port]`); raise `UsageError`."""
    return [parse_target(hop) for hop in chain.split(",")]


class Connector:
    """Opens `Link`s to one target with fixed options; used again for every reconnect.

    Args:
        target: Where to connect (before the SSH config is applied).
        options: Keys, known_hosts, config file, timeouts.
    """

    def __init__(self, target: Target, options: SSHOptions) -> None:
        self.target = target
        self.options = options
        self.jump_chain = parse_jumps(options.jump) if options.jump else None

    def _resolve(self, target: Target) -> tuple[asyncssh.SSHClientConnectionOptions, dict[str, object]]:
        """The SSH config applied to `target`, and the login arguments to connect it with."""
        o = self.options
        login: dict[str, object] = {
            "config": [str(o.ssh_config)] if o.ssh_config else (),
            "port": target.port if target.port is not None else (),
            "username": target.user or (),
            "client_keys": [str(path) for path in o.identity_files] if o.identity_files else (),
            "agent_path": () if o.use_agent else None,
            "connect_timeout": o.connect_timeout,
            "keepalive_interval": o.keepalive_interval,
            "keepalive_count_max": o.keepalive_count_max,
        }
        try:
            resolved = asyncssh.SSHClientConnectionOptions(host=target.host, known_hosts=None, **login)
        except (OSError, ValueError, asyncssh.Error) as exc:
            raise SSHError(
                SSHErrorKind.CONFIG, f"{target}: cannot use the SSH config or identity files: {exc}"
            ) from exc
        return resolved, login

    def _known_hosts_files(self, resolved: asyncssh.SSHClientConnectionOptions) -> list[Path]:
        if self.options.known_hosts is not None:
            return [self.options.known_hosts]
        user_files = _config_list(resolved, "UserKnownHostsFile") or ["~/.ssh/known_hosts"]
        global_files = _config_list(resolved, "GlobalKnownHostsFile") or [str(GLOBAL_KNOWN_HOSTS)]
        return [Path(str(name)).expanduser() for name in [*user_files, *global_files]]

    def _keys_offered(self, resolved: asyncssh.SSHClientConnectionOptions) -> list[str]:
        if self.options.identity_files:
            keys = [str(path) for path in self.options.identity_files]
        elif configured := _config_list(resolved, "IdentityFile"):
            keys = [str(Path(str(name)).expanduser()) for name in configured]
        else:
            keys = [str(path) for name in DEFAULT_KEY_FILES if (path := Path.home() / ".ssh" / name).is_file()]
        sock = os.environ.get("SSH_AUTH_SOCK")
        if self.options.use_agent and sock:
            keys.append(f"the keys of the ssh-agent at {sock}")
        return keys

    async def open(self) -> Link:
        """Connect through the jump chain (if any) to the target; raise `SSHError`."""
        resolved, _ = self._resolve(self.target)
        chain = self.jump_chain
        if chain is None and isinstance(resolved.tunnel, str) and resolved.tunnel.lower() != "none":
            try:
                chain = parse_jumps(resolved.tunnel)
            except UsageError as exc:
                raise SSHError(SSHErrorKind.CONFIG, f"ProxyJump for {self.target.host}: {exc.message}") from exc
        jumps: list[asyncssh.SSHClientConnection] = []
        try:
            for hop in chain or ():
                try:
                    jump_conn, _ = await self._connect_one(hop, jumps[-1] if jumps else None)
                except SSHError as exc:
                    raise SSHError(SSHErrorKind.JUMP, f"jump host {hop}: {exc.message}", cause_kind=exc.kind) from exc
                jumps.append(jump_conn)
            conn, client = await self._connect_one(self.target, jumps[-1] if jumps else None)
        except BaseException:
            for jump_conn in reversed(jumps):
                jump_conn.close()
            raise
        return Link(conn, client, jumps)

    async def _connect_one(
        self, target: Target, tunnel: asyncssh.SSHClientConnection | None
    ) -> tuple[asyncssh.SSHClientConnection, SessionClient]:
        resolved, login = self._resolve(target)
        host, port = resolved.host, resolved.port
        where = f"{host}:{port}"
        if host != target.host:
            where += f" ({target.host} in the SSH config)"
        label = f"{resolved.username}@{where}"  # the login user may hold an "@" itself (`a@b@host`: user `a@b`)
        policy = HostKeyPolicy(self._known_hosts_files(resolved), accept_new=self.options.accept_new)
        client = SessionClient(policy)
        try:
            # tunnel=None (not ()) keeps asyncssh from opening ProxyJump itself: _open already did, with
            # our known_hosts policy and error naming.
            conn = await asyncssh.connect(
                target.host,
                tunnel=tunnel,
                known_hosts=policy.asyncssh_known_hosts(),
                client_factory=lambda: client,
                **login,
            )
        except (OSError, asyncssh.Error) as exc:
            error = self._connect_error(exc, label, where, host, policy, self._keys_offered(resolved))
            if error.kind is SSHErrorKind.TIMEOUT and client.reached:
                # Something took the TCP connection and never finished an SSH handshake: not a host that is
                # down, but another service on that port (or a tarpit).
                error = SSHError(
                    SSHErrorKind.TIMEOUT,
                    f"timed out after {self.options.connect_timeout:g} s: {where} took the connection but never "
                    "finished an SSH handshake (is it an SSH server? another service on that port answers so)",
                )
            raise error from exc
        return conn, client

    def _connect_error(
        self, exc: Exception, label: str, where: str, host: str, policy: HostKeyPolicy, keys: list[str]
    ) -> SSHError:
        """`label` is `user@host:port`, `where` the `host:port` part (never cut out of `label`: a user may hold "@")."""
        if isinstance(exc, socket.gaierror):
            return SSHError(SSHErrorKind.DNS, f"cannot resolve host name {host!r}: {exc.strerror or exc}")
        if isinstance(exc, TimeoutError):
            return SSHError(
                SSHErrorKind.TIMEOUT,
                f"timed out after {self.options.connect_timeout:g} s connecting to {where} (no answer)",
            )
        if isinstance(exc, OSError):
            return SSHError(SSHErrorKind.UNREACHABLE, f"cannot reach {where}: {_oserror_reason(exc)}")
        if isinstance(exc, asyncssh.HostKeyNotVerifiable):
            problem = policy.problem
            if problem is None:
                return SSHError(SSHErrorKind.HOST_KEY_REJECTED, f"host key of {where} rejected: {exc.reason}")
            kind = SSHErrorKind.HOST_KEY_CHANGED if problem.verdict == "changed" else SSHErrorKind.HOST_KEY_UNKNOWN
            return SSHError(kind, problem.message())
        if isinstance(exc, asyncssh.PermissionDenied):
            tried = "; ".join(keys) if keys else "none (no -i, IdentityFile, ~/.ssh/id_* or agent)"
            return SSHError(SSHErrorKind.AUTH, f"authentication failed for {label}: {exc.reason}. Keys tried: {tried}")
        reason = exc.reason if isinstance(exc, asyncssh.DisconnectError) else str(exc)
        return SSHError(SSHErrorKind.PROTOCOL, f"SSH session with {where} failed: {reason}")
