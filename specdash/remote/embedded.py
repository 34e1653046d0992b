"""An SSH server on loopback for `specdash demo` and the UI tests.

It lets the demo go through exactly the client code path used against real hosts (`SSHHost`: host-key
verification, exec channels, port forwarding, keepalive) without an installed sshd. It binds 127.0.0.1
only, makes an ephemeral host key and an ephemeral client key in a private temporary directory, accepts
only that client key, runs each exec request as a local shell command in its own process group (with
extra environment variables, e.g. a PATH that finds the simulator's `nvidia-smi`), and allows TCP
forwarding to loopback only. When a channel closes, the command's process group is killed, so
a `tail -F` never outlives its stream (OpenSSH's sshd leaves it running until its next write).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from specdash.remote.sshlib import asyncssh

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


@dataclass(frozen=True)
class EmbeddedEndpoint:
    """How to reach a running embedded server."""

    host: str
    """Always 127.0.0.1."""
    port: int
    """The listening port (chosen by the kernel)."""
    username: str
    """The user name to log in with (any name works; this is the local user)."""
    client_key: Path
    """The private key the server accepts."""
    known_hosts: Path
    """A known_hosts file holding the server's host key, for verification as usual."""

    @property
    def target(self) -> str:
        """`user@127.0.0.1:port`, as typed on a command line."""
        return f"{self.username}@{self.host}:{self.port}"


class _Server(asyncssh.SSHServer):
    def __init__(self, client_key: asyncssh.SSHKey) -> None:
        self._client_key = client_key

    def begin_auth(self, username: str) -> bool:
        return True

    def public_key_auth_supported(self) -> bool:
        return True

    def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        return bool(key.public_data == self._client_key.public_data)

    def connection_requested(self, dest_host: str, dest_port: int, orig_host: str, orig_port: int) -> bool:
        # Forwarding reaches this machine's loopback only: the demo's servers listen there.
        return dest_host in _LOOPBACK


async def _pump_out(reader: asyncio.StreamReader, writer: asyncssh.SSHWriter[bytes]) -> None:
    while chunk := await reader.read(65536):
        writer.write(chunk)
        await writer.drain()


async def _pump_in(reader: asyncssh.SSHReader[bytes], proc: asyncio.subprocess.Process) -> None:
    assert proc.stdin is not None
    with contextlib.suppress(ConnectionError, asyncssh.Error):
        while chunk := await reader.read(65536):
            proc.stdin.write(chunk)
            await proc.stdin.drain()
    with contextlib.suppress(ConnectionError):
        proc.stdin.close()


async def _run_command(process: asyncssh.SSHServerProcess[bytes], env: Mapping[str, str] | None = None) -> None:
    """Run one exec request as a local command; kill its process group if the channel goes away first."""
    proc = await asyncio.create_subprocess_exec(
        "/bin/bash",
        "-c",
        process.command or "true",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, **env} if env else None,
    )
    assert proc.stdout is not None and proc.stderr is not None
    feeder = asyncio.create_task(_pump_in(process.stdin, proc))
    output: asyncio.Future[Any] = asyncio.gather(
        _pump_out(proc.stdout, process.stdout), _pump_out(proc.stderr, process.stderr)
    )
    closed: asyncio.Future[Any] = asyncio.ensure_future(process.wait_closed())
    try:
        await asyncio.wait([output, closed], return_when=asyncio.FIRST_COMPLETED)
        if output.done() and not output.exception():
            status = await proc.wait()
            with contextlib.suppress(ConnectionError, asyncssh.Error):
                process.exit(status if status >= 0 else 128 - status)
    finally:
        output.cancel()
        closed.cancel()
        # Retrieve the outcome so a cancelled or failed pump is not reported as "never retrieved".
        with contextlib.suppress(asyncio.CancelledError, ConnectionError, asyncssh.Error):
            await output
        feeder.cancel()
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()


class EmbeddedSSHServer:
    """Start with `await server.start()`, stop with `await server.stop()`."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        """`env`: variables set for every command run on this host, over ours (a login's environment)."""
        self._env = dict(env or {})
        self._dir = tempfile.TemporaryDirectory(prefix="specdash-demo-ssh-")
        self._server: asyncssh.SSHAcceptor | None = None
        self.endpoint: EmbeddedEndpoint | None = None

    async def start(self) -> EmbeddedEndpoint:
        """Generate keys, listen on 127.0.0.1 (a free port), and return how to connect."""
        base = Path(self._dir.name)
        os.chmod(base, 0o700)
        host_key = asyncssh.generate_private_key("ssh-ed25519")
        client_key = asyncssh.generate_private_key("ssh-ed25519")
        client_path = base / "client_ed25519"
        client_key.write_private_key(str(client_path))
        os.chmod(client_path, 0o600)
        self._server = await asyncssh.create_server(
            lambda: _Server(client_key),
            "127.0.0.1",
            0,
            server_host_keys=[host_key],
            process_factory=partial(_run_command, env=self._env),
            encoding=None,
            allow_pty=False,
            x11_forwarding=False,
            agent_forwarding=False,
        )
        port = self._server.sockets[0].getsockname()[1]
        known_hosts = base / "known_hosts"
        known_hosts.write_text(f"[127.0.0.1]:{port} {host_key.export_public_key().decode().strip()}\n")
        username = os.environ.get("USER") or "demo"
        self.endpoint = EmbeddedEndpoint("127.0.0.1", port, username, client_path, known_hosts)
        return self.endpoint

    async def stop(self) -> None:
        """Stop listening, close connections and remove the keys."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        self._dir.cleanup()
