"""Shared by the startup benchmarks: a loopback sshd (the tests' machinery) and a session on it.

Everything stays on this machine: sshd listens on 127.0.0.1 and the simulator binds 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

from specdash.bench.store import Store
from specdash.config import Config, HostConfig
from specdash.ports import free_port
from specdash.remote.ssh import SSHHost, SSHOptions
from specdash.server.remote_session import RemoteSession, running
from specdash.server.session import Listener
from tests.support.remote_sim import sim_config
from tests.support.sshd import TEST_USER, Keys, Sshd, ensure_test_user, make_dir


@contextlib.contextmanager
def loopback_sshd() -> Iterator[tuple[Sshd, SSHOptions]]:
    """A running sshd for the test user, and client options that trust it."""
    ensure_test_user()
    directory = make_dir("specdash-bench-")
    keys = Keys.create(directory)
    server = Sshd(keys, name="bench").start()
    known = Path(directory) / "known_hosts"
    known.write_text(server.known_hosts_line() + "\n")
    empty = Path(directory) / "ssh_config"
    empty.write_text("")
    options = SSHOptions(
        identity_files=(keys.client_key,), known_hosts=known, ssh_config=empty, use_agent=False, connect_timeout=5
    )
    try:
        yield server, options
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)


def bench_config(directory: Path, time_scale: float, tp: int = 8) -> tuple[Config, int]:
    """Simulator modes (baseline, eagle3, crash) on a free port, TP 8 like the field's host."""
    port = free_port()
    return sim_config(directory, port=port, time_scale=time_scale, tp=tp), port


@contextlib.asynccontextmanager
async def session_on(
    server: Sshd, options: SSHOptions, cfg: Config, store: Store | None, listener: Listener
) -> AsyncIterator[RemoteSession]:
    """A running RemoteSession on the loopback sshd."""
    address = f"{TEST_USER}@{server.listen}:{server.port}"
    session = RemoteSession(SSHHost(address, options), HostConfig(name="bench-host", address=address), cfg, store=store)
    async with running(session, listener) as live:
        yield live
