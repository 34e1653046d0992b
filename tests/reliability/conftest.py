"""Reliability fixtures: a remote host in a network namespace (link cuts), sshd kill/restart, recorders.

The shared loopback sshd and keys come from `tests/integration/conftest.py`. Namespace tests are marked
`netns` and skip, with the kernel's words, only where `ip netns add` is refused.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from specdash.config import Config, HostConfig
from specdash.remote.ssh import SSHHost, SSHOptions
from specdash.server.lifecycle import Lifecycle
from tests.integration.conftest import (  # noqa: F401  (fixtures re-exported for this tier)
    known_hosts,
    make_sshd,
    ssh_keys,
    ssh_options,
    sshd,
    target,
)
from tests.support import netns as netns_mod
from tests.support.netns import Netns
from tests.support.sshd import TEST_HOME, TEST_USER, Keys, Sshd

TIMINGS: list[str] = []
"""Times measured by the running test; moved to its report afterwards (see `_timings_to_report`)."""


_STATE_DIRS: list[str] = []


def state_dir(tmp_path: Path) -> str:
    """A remote state dir of this test alone (tmp_path's name repeats across sessions; the pid does not);
    removed after the test (every "remote" host here shares this machine's /home)."""
    name = f".specdash-tests/{tmp_path.name}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    _STATE_DIRS.append(name)
    return f"~/{name}"


@pytest.fixture(autouse=True)
def _remove_state_dirs() -> Iterator[None]:
    """Set up first, so torn down last: after the servers in those directories were stopped."""
    yield
    while _STATE_DIRS:
        shutil.rmtree(TEST_HOME / _STATE_DIRS.pop(), ignore_errors=True)


@pytest.fixture(autouse=True)
def _timings_to_report(request: pytest.FixtureRequest) -> Iterator[None]:
    """The test's measured times go into its report's `user_properties` as ("timing", text): reports reach
    the main process also from pytest-xdist workers, where tests/conftest.py prints them at the end."""
    yield
    while TIMINGS:
        request.node.user_properties.append(("timing", TIMINGS.pop(0)))


def timing(text: str) -> None:
    """Record a measured time for the summary at the end of the run."""
    TIMINGS.append(text)
    print(f"[timing] {text}")


_netns_reason: list[str | None] = []


@pytest.fixture
def netns() -> Iterator[Netns]:
    """A fresh namespace with a veth link (no sshd yet); torn down after the test."""
    if not _netns_reason:
        _netns_reason.append(netns_mod.unavailable())
    if _netns_reason[0]:
        pytest.skip(f"network namespaces unavailable: {_netns_reason[0]}")
    ns = Netns.create()
    try:
        yield ns
    finally:
        ns.close()


@dataclass
class RemoteHost:
    """An sshd in a namespace, and how to reach it."""

    ns: Netns
    sshd: Sshd
    options: SSHOptions
    """Our key, our known_hosts, keepalive 1 s x 3 (a cut is noticed after about 3.5 s)."""

    @property
    def target(self) -> str:
        return f"{TEST_USER}@{self.ns.addr}:22"

    def host_config(self, name: str, state_dir: str) -> HostConfig:
        return HostConfig(name=name, address=self.target, state_dir=state_dir)


@pytest.fixture
def remote(netns: Netns, ssh_keys: Keys, ssh_options: SSHOptions, tmp_path: Path) -> RemoteHost:  # noqa: F811
    """sshd inside `netns`, trusted by a known_hosts of its own."""
    server = netns.start_sshd(ssh_keys)
    kh = tmp_path / "ns_known_hosts"
    # Port 22: OpenSSH's known_hosts form is the bare address (no `[addr]:22`).
    kh.write_text(f"{netns.addr} " + " ".join(ssh_keys.host_pub.split()[:2]) + "\n")
    options = SSHOptions(
        **{
            **ssh_options.__dict__,
            "known_hosts": kh,
            "keepalive_interval": 1.0,
            "keepalive_count_max": 3,
            "backoff_initial": 0.1,
            "backoff_max": 0.5,
            "connect_timeout": 2.0,
        }
    )
    return RemoteHost(netns, server, options)


async def stop_live_run(address: str, options: SSHOptions, host_cfg: HostConfig) -> None:
    """Stop whatever run of `host_cfg` is live (test cleanup)."""
    async with SSHHost(address, options) as h:
        lifecycle = Lifecycle(h, host_cfg)
        record = await lifecycle.current()
        if record is not None and record.alive:
            await lifecycle.stop(record, grace=3)


@pytest.fixture
async def loopback_cleanup() -> AsyncIterator[list[tuple[str, SSHOptions, HostConfig]]]:
    """Register (address, options, host config) to have its live run stopped after the test."""
    todo: list[tuple[str, SSHOptions, HostConfig]] = []
    yield todo
    for address, options, hc in todo:
        await stop_live_run(address, options, hc)


def with_config_hosts(cfg: Config, hosts: dict[str, HostConfig]) -> Config:
    """`cfg` with extra host entries."""
    from dataclasses import replace

    return replace(cfg, hosts={**cfg.hosts, **hosts})
