"""Connecting like OpenSSH: known_hosts policy, auth failures, jump hosts, ~/.ssh/config aliases."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from specdash.remote.events import Connecting, Failed
from specdash.remote.ssh import SSHHost, SSHOptions
from specdash.remote.ssherror import SSHError, SSHErrorKind
from tests.integration.conftest import target, trust
from tests.support.ports import free_port
from tests.support.sshd import TEST_USER, Keys, Sshd, keygen, socket_owners


def _with(options: SSHOptions, **changes: object) -> SSHOptions:
    return dataclasses.replace(options, **changes)  # type: ignore[arg-type]


async def _connect_error(server_or_target: Sshd | str, options: SSHOptions) -> SSHError:
    name = server_or_target if isinstance(server_or_target, str) else target(server_or_target)
    host = SSHHost(name, options)
    with pytest.raises(SSHError) as caught:
        await host.connect()
    await host.close()
    return caught.value


async def test_unknown_host_is_refused_and_known_hosts_untouched(
    sshd: Sshd, ssh_options: SSHOptions, tmp_path: Path
) -> None:
    known_hosts = tmp_path / "empty_known_hosts"
    known_hosts.write_text("")
    error = await _connect_error(sshd, _with(ssh_options, known_hosts=known_hosts))
    assert error.kind is SSHErrorKind.HOST_KEY_UNKNOWN
    assert f"[127.0.0.1]:{sshd.port}" in error.message
    assert str(known_hosts) in error.message
    assert "SHA256:" in error.message
    assert known_hosts.read_text() == ""


async def test_accept_new_records_the_key_then_verifies_it(sshd: Sshd, ssh_options: SSHOptions, tmp_path: Path) -> None:
    known_hosts = tmp_path / "dot_ssh" / "known_hosts"  # missing, like a fresh ~/.ssh
    async with SSHHost(target(sshd), _with(ssh_options, known_hosts=known_hosts, accept_new=True)) as host:
        assert (await host.run("echo in")).stdout == "in\n"
    assert known_hosts.read_text() == sshd.known_hosts_line() + "\n"
    # The recorded line is what OpenSSH itself accepts.
    async with SSHHost(target(sshd), _with(ssh_options, known_hosts=known_hosts)) as host:
        assert (await host.run("echo again")).ok
    assert known_hosts.read_text().count("\n") == 1


async def test_changed_key_is_refused_loudly_even_with_accept_new(
    sshd: Sshd, ssh_options: SSHOptions, tmp_path: Path, ssh_keys: Keys
) -> None:
    impostor = " ".join(keygen(tmp_path / "impostor", "impostor").split()[:2])
    known_hosts = tmp_path / "known_hosts_changed"
    known_hosts.write_text(f"some.other.host {impostor}\n[127.0.0.1]:{sshd.port} {impostor}\n")
    before = known_hosts.read_text()
    error = await _connect_error(sshd, _with(ssh_options, known_hosts=known_hosts, accept_new=True))
    assert error.kind is SSHErrorKind.HOST_KEY_CHANGED
    assert error.permanent
    assert "man-in-the-middle" in error.message
    assert f"{known_hosts}:2" in error.message
    assert known_hosts.read_text() == before


async def test_auth_failure_names_the_keys_tried(sshd: Sshd, ssh_options: SSHOptions, ssh_keys: Keys) -> None:
    error = await _connect_error(sshd, _with(ssh_options, identity_files=(ssh_keys.other_key,)))
    assert error.kind is SSHErrorKind.AUTH
    assert str(ssh_keys.other_key) in error.message
    assert f"{TEST_USER}@127.0.0.1:{sshd.port}" in error.message


async def test_unreachable_names_host_port_and_reason(ssh_options: SSHOptions) -> None:
    port = free_port()
    events: list[object] = []
    host = SSHHost(f"{TEST_USER}@127.0.0.1:{port}", ssh_options, on_event=events.append)
    with pytest.raises(SSHError) as caught:
        await host.connect()
    assert caught.value.kind is SSHErrorKind.UNREACHABLE
    assert f"127.0.0.1:{port}" in caught.value.message and "Connection refused" in caught.value.message
    assert [type(event) for event in events] == [Connecting, Failed]


async def test_dns_failure_is_its_own_kind(ssh_options: SSHOptions) -> None:
    error = await _connect_error("nosuchhost.invalid", ssh_options)
    assert error.kind in (SSHErrorKind.DNS, SSHErrorKind.TIMEOUT)  # TIMEOUT: a resolver that never answers
    assert "nosuchhost.invalid" in error.message


async def test_jump_host(
    sshd: Sshd, make_sshd: Callable[..., Sshd], ssh_options: SSHOptions, known_hosts: Path
) -> None:
    jump = make_sshd("jump")
    trust(known_hosts, jump)
    async with SSHHost(target(sshd), _with(ssh_options, jump=target(jump))) as host:
        client_port = (await host.run("echo $SSH_CONNECTION")).stdout.split()[1]
        # The target's client socket belongs to a session process of the jump sshd, not to us.
        owners = socket_owners(int(client_port))
        assert set(owners) & set(jump.session_pids()), owners
    assert f"Accepted publickey for {TEST_USER}" in jump.log_text()


async def test_failing_jump_host_is_named(sshd: Sshd, ssh_options: SSHOptions) -> None:
    dead = f"{TEST_USER}@127.0.0.1:{free_port()}"
    error = await _connect_error(sshd, _with(ssh_options, jump=dead))
    assert error.kind is SSHErrorKind.JUMP
    assert error.cause_kind is SSHErrorKind.UNREACHABLE
    assert f"jump host {dead}" in error.message


async def test_ssh_config_alias_with_proxyjump(
    sshd: Sshd, make_sshd: Callable[..., Sshd], ssh_options: SSHOptions, ssh_keys: Keys, tmp_path: Path
) -> None:
    jump = make_sshd("cfgjump")
    config = tmp_path / "config_alias"
    config.write_text(
        f"Host gpu-box\n    HostName 127.0.0.1\n    Port {sshd.port}\n    User {TEST_USER}\n"
        f"    IdentityFile {ssh_keys.client_key}\n    ProxyJump hop\n"
        f"Host hop\n    HostName 127.0.0.1\n    Port {jump.port}\n    User {TEST_USER}\n"
        f"    IdentityFile {ssh_keys.client_key}\n"
    )
    known_hosts = tmp_path / "kh_alias"
    known_hosts.write_text(sshd.known_hosts_line() + "\n" + jump.known_hosts_line() + "\n")
    options = _with(ssh_options, ssh_config=config, identity_files=(), known_hosts=known_hosts)
    async with SSHHost("gpu-box", options) as host:
        assert (await host.run("whoami")).stdout == f"{TEST_USER}\n"
    assert f"Accepted publickey for {TEST_USER}" in jump.log_text()


async def test_bad_host_string_is_a_usage_error() -> None:
    from specdash.errors import UsageError

    with pytest.raises(UsageError, match="'root@h:99999'"):
        SSHHost("root@h:99999")
    with pytest.raises(UsageError, match="'j:0'"):
        SSHHost("h", SSHOptions(jump="j:0"))
