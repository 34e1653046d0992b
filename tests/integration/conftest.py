"""Integration fixtures: a real OpenSSH sshd on loopback, a test user, connected `SSHHost`s, and local
simulators (`sim`).

The machinery lives in `tests/support/sshd.py` so later tiers (jump hosts, network namespaces, the simulator run
as the test user) reuse it. One sshd serves the whole session; tests that kill or pause a server start
their own with `make_sshd`.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from specdash.remote.ssh import SSHHost, SSHOptions
from tests.support.sim_harness import Simulators
from tests.support.slurm import SlurmCluster
from tests.support.slurm import skip_reason as slurm_skip_reason
from tests.support.sshd import TEST_USER, Keys, Sshd, ensure_test_user, make_dir, skip_reason


@pytest.fixture(scope="session")
def ssh_keys() -> Iterator[Keys]:
    """Session-wide keys and the test user (created once, idempotently; skips when not root)."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    ensure_test_user()
    directory = make_dir("specdash-sshd-")
    yield Keys.create(directory)
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def sshd(ssh_keys: Keys) -> Iterator[Sshd]:
    """The shared sshd on 127.0.0.1 (MaxSessions 10, OpenSSH's default). Do not stop it in a test."""
    server = Sshd(ssh_keys, name="shared").start()
    yield server
    server.stop()


@pytest.fixture
def make_sshd(ssh_keys: Keys) -> Iterator[Callable[..., Sshd]]:
    """Start extra servers (jump hosts, servers to kill); all are stopped after the test."""
    started: list[Sshd] = []

    def make(name: str, **kwargs: object) -> Sshd:
        server = Sshd(ssh_keys, name=f"{name}-{len(started)}", **kwargs)  # type: ignore[arg-type]
        started.append(server)
        return server.start()

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def known_hosts(tmp_path: Path, sshd: Sshd) -> Path:
    """A known_hosts file that trusts the shared sshd."""
    path = tmp_path / "known_hosts"
    path.write_text(sshd.known_hosts_line() + "\n")
    return path


@pytest.fixture
def ssh_options(tmp_path: Path, ssh_keys: Keys, known_hosts: Path) -> SSHOptions:
    """Options that read nothing from root's ~/.ssh: our key, our known_hosts, an empty config, no agent."""
    config = tmp_path / "ssh_config"
    config.write_text("")
    return SSHOptions(
        identity_files=(ssh_keys.client_key,),
        known_hosts=known_hosts,
        ssh_config=config,
        use_agent=False,
        connect_timeout=5.0,
        backoff_initial=0.05,
    )


def trust(known_hosts: Path, *servers: Sshd) -> None:
    """Add the servers' host keys to a known_hosts file."""
    with known_hosts.open("a") as out:
        out.writelines(server.known_hosts_line() + "\n" for server in servers)


async def remote_alive(host: SSHHost, pid: int) -> bool:
    """Whether a remote process runs; a zombie counts as gone (our PID 1 reaps orphans only slowly)."""
    return (await host.run(f"grep -qv ') Z ' /proc/{pid}/stat 2>/dev/null")).ok


def target(server: Sshd) -> str:
    """`user@addr:port` of a test server."""
    return f"{TEST_USER}@{server.listen}:{server.port}"


@pytest.fixture
async def host(sshd: Sshd, ssh_options: SSHOptions) -> AsyncIterator[SSHHost]:
    """A connected host on the shared sshd."""
    async with SSHHost(target(sshd), ssh_options) as connected:
        yield connected


@pytest.fixture
async def sim() -> AsyncIterator[Simulators]:
    """Start local simulators (`await sim(*args, port=, scale=, env=, ready=)`, see `Simulators`); every
    process group is killed at teardown, whatever the test did."""
    sims = Simulators()
    try:
        yield sims
    finally:
        await sims.close()


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    reason = slurm_skip_reason()
    if reason:
        pytest.skip(reason)
    cluster = SlurmCluster().start()
    yield cluster
    cluster.stop()


@pytest.fixture
def cluster(slurm_cluster: SlurmCluster) -> Iterator[SlurmCluster]:
    """The session's cluster with both nodes idle and an empty queue, before and after each test."""
    slurm_cluster.wait_idle()
    yield slurm_cluster
    for node in ("n1", "n2"):
        slurm_cluster.start_node(node)
    slurm_cluster.cancel_all()
    slurm_cluster.reap_strays()  # a killed node's steps outlive its job
    slurm_cluster.wait_idle()
