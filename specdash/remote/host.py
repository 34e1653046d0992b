"""The `Host` interface: everything specdash does on a machine goes through one of these.

The production implementation is `specdash.remote.ssh.SSHHost` (one supervised asyncssh connection).
`specdash demo` uses the same class against an embedded asyncssh server on loopback.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class RunResult:
    """What a finished remote command returned."""

    exit_status: int
    """The command's exit status (-1 when it was killed by a signal and the status is unknown)."""
    stdout: str
    """Everything the command wrote to standard output."""
    stderr: str
    """Everything the command wrote to standard error."""

    @property
    def ok(self) -> bool:
        """True when the command exited 0."""
        return self.exit_status == 0


class Host(Protocol):
    """A machine we can run commands on, stream from and forward ports to."""

    @property
    def name(self) -> str:
        """How the user named the host (for messages)."""
        ...

    async def run(self, command: str, *, timeout: float = 30.0, stdin: str | None = None) -> RunResult:
        """Run a shell command to completion; raise `SpecdashError` on timeout or a lost connection."""
        ...

    def stream(self, command: str) -> AsyncIterator[str]:
        """Run a command and yield its output lines (split on `\\r` and `\\n`) as they arrive."""
        ...

    async def forward(self, remote_port: int, remote_host: str = "127.0.0.1") -> int:
        """Forward a local port on 127.0.0.1 to `remote_host:remote_port` on the host; return the local port.

        The port stays the same across reconnects (refusing connections while the link is down).
        """
        ...

    async def close(self) -> None:
        """Close the connection and everything that runs over it."""
        ...
