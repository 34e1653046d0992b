"""The fleet with hostile hosts beside a good one, over real sockets: a host that accepts and never speaks
(a tarpit), one that answers with terminal escapes and garbage instead of SSH, and one whose host key
changed. Each fails its own row with its own reason, printed safely; the good host connects and serves
regardless, and the keyboard answers while the tarpit still holds its connection open.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
from textual.widgets import DataTable

from specdash.config import HostConfig
from specdash.remote.ssh import SSHHost, SSHOptions
from specdash.server.remote_session import RemoteSession
from specdash.ui.fleet import FleetApp, FleetScreen
from specdash.ui.screens.dashboard import DashboardScreen
from tests.integration.conftest import target
from tests.support.eventually import eventually
from tests.support.ports import free_port
from tests.support.remote_sim import sim_config
from tests.support.settle import on_screen
from tests.support.sshd import Sshd, keygen

GARBAGE = b"\x1b]52;c;ZXZpbA==\x07\x1b[2J\x1b[31mHTTP/1.1 400 Bad Request\r\n\x00\xff\xfe" * 4 + b"\r\n"


@pytest.fixture
async def hostile_ports() -> AsyncIterator[tuple[int, int, list[asyncio.StreamWriter]]]:
    """Two loopback listeners of the test's own: a tarpit (accepts, never writes) and a babbler."""
    held: list[asyncio.StreamWriter] = []

    async def tarpit(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # kept open, silent, until the test ends

    async def babbler(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(GARBAGE)
        await writer.drain()
        held.append(writer)

    servers = [await asyncio.start_server(h, "127.0.0.1", 0) for h in (tarpit, babbler)]
    ports = [s.sockets[0].getsockname()[1] for s in servers]
    try:
        yield ports[0], ports[1], held
    finally:
        for writer in held:
            writer.close()
        for s in servers:
            s.close()
            await s.wait_closed()


def row_text(app: FleetApp, i: int) -> str:
    return " | ".join(str(c) for c in app.fleet.query_one(DataTable).get_row_at(i))


async def test_hostile_hosts_fail_their_own_rows_and_never_stall_the_good_one(
    sshd: Sshd,
    ssh_options: SSHOptions,
    tmp_path: Path,
    hostile_ports: tuple[int, int, list[asyncio.StreamWriter]],
) -> None:
    tarpit_port, babbler_port, held = hostile_ports
    cfg = sim_config(tmp_path, port=free_port())
    base = f"~/.specdash-tests/fleet-hostile-{uuid.uuid4().hex[:10]}"
    # The tarpit's handshake is bounded by the connect timeout; 20 s is long enough to see whether it stalls
    # anything else.
    slow = replace(ssh_options, connect_timeout=20.0)
    other_key = keygen(tmp_path / "other_host_key", "not-the-servers-key")
    changed = tmp_path / "known_hosts_changed"
    changed.write_text(f"[{sshd.listen}]:{sshd.port} " + " ".join(other_key.split()[:2]) + "\n")
    hosts = [
        (HostConfig(name="good", address=target(sshd), state_dir=f"{base}/good"), slow),
        (HostConfig(name="tarpit", address=f"specdash-test@127.0.0.1:{tarpit_port}", state_dir=f"{base}/t"), slow),
        (HostConfig(name="babbler", address=f"specdash-test@127.0.0.1:{babbler_port}", state_dir=f"{base}/b"), slow),
        (HostConfig(name="rekeyed", address=target(sshd), state_dir=f"{base}/r"), replace(slow, known_hosts=changed)),
    ]
    sessions = [RemoteSession(SSHHost(hc.address, opts), hc, cfg) for hc, opts in hosts]
    app = FleetApp(sessions, tick=1.0)
    async with app.run_test(size=(100, 30)) as pilot:
        try:
            await on_screen(app, FleetScreen)
            await eventually(lambda: app.hosts[0].row.link, until=lambda v: v == "connected", timeout=15, what="good")
            assert held, "the tarpit holds a connection open"
            # The good host serves while the tarpit is still in its handshake.
            await sessions[0].start("baseline")
            await eventually(lambda: row_text(app, 0), until=lambda t: "| ready |" in t, timeout=60, what="good ready")
            await eventually(
                lambda: (row_text(app, 2), row_text(app, 3)),
                until=lambda rows: all("failed" in t for t in rows),
                timeout=30,
                what="the babbler and the re-keyed host failed",
            )
            babble = app.hosts[2].row.alert
            changed_key = app.hosts[3].row.alert
            assert "\x1b" not in babble and "\x07" not in babble and "\x00" not in babble, babble
            assert "host key" in changed_key.lower(), changed_key
            # The keyboard answers with the tarpit still open: enter opens the good host's dashboard, back again.
            app.fleet.query_one(DataTable).move_cursor(row=0)
            await pilot.press("enter")
            await pilot.pause()
            assert (await on_screen(app, DashboardScreen)).session is sessions[0]
            await pilot.press("backspace")
            await pilot.pause()
            await on_screen(app, FleetScreen)
            # The tarpit ends as a failure of its own row once its connect timeout runs out.
            await eventually(lambda: row_text(app, 1), until=lambda t: "failed" in t, timeout=60, what="tarpit")
            assert "| ready |" in row_text(app, 0)
            # Not "no answer": both took the connection and never spoke SSH.
            for alert in (app.hosts[1].row.alert, babble):
                assert "took the connection but never finished an SSH handshake" in alert, alert
            for screen_text in (row_text(app, i) for i in range(4)):
                assert "\x1b" not in screen_text
            await sessions[0].stop()
            await pilot.press("q")
        finally:
            if sessions[0].server_live():
                await sessions[0].stop()
