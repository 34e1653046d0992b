"""`SSHOptions`: how `SSHHost` connects and supervises (the `-i`, `-J`, known_hosts ... of the CLI)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SSHOptions:
    """How to connect and supervise; the defaults are what an OpenSSH user gets."""

    identity_files: tuple[Path, ...] = ()
    """`-i KEY`: private keys to offer instead of IdentityFile / `~/.ssh/id_*` (the agent is still asked)."""
    jump: str | None = None
    """`-J [user@]host[:port][,...]`: jump hosts, in order; overrides ProxyJump from the SSH config."""
    known_hosts: Path | None = None
    """known_hosts file to check and to append to; default: UserKnownHostsFile, else `~/.ssh/known_hosts`."""
    accept_new: bool = False
    """OpenSSH's `StrictHostKeyChecking=accept-new`: record the key of a host with no entry at all."""
    ssh_config: Path | None = None
    """OpenSSH client config file to read; default `~/.ssh/config`."""
    use_agent: bool = True
    """Offer the keys of the SSH agent at `$SSH_AUTH_SOCK`."""
    connect_timeout: float = 10.0
    """Seconds for TCP connect + handshake + authentication, per hop."""
    keepalive_interval: float = 5.0
    """Seconds between keepalive requests; without them a cut link is never noticed."""
    keepalive_count_max: int = 3
    """Unanswered keepalives after which the connection counts as lost."""
    max_sessions: int = 8
    """Concurrent exec channels (runs + streams); keep it below the server's MaxSessions (default 10)."""
    backoff_initial: float = 0.5
    """First reconnect delay in seconds; doubles per failed attempt."""
    backoff_max: float = 30.0
    """Upper bound of the reconnect delay."""
    log_file: Path | None = None
    """Where asyncssh logs; default `specdash.paths.log_dir() / "ssh.log"`."""
