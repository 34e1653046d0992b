"""The fleet view over real sessions: a plain host serving the simulator, an idle host, a Slurm login node with
a two-node job, and a host nobody answers on. One row each; the dead host fails its own row only; enter opens
a host's dashboard, `]` cycles hosts, backspace goes back.

With SPECDASH_SHOTS=DIR the test also saves the fleet as SVG at 80x24, 100x30 and 160x45 (for review).
"""

from __future__ import annotations

import os
import uuid
from dataclasses import replace
from pathlib import Path

from textual.widgets import DataTable, Input, Static

from specdash.bench.probe import ProbeSettings
from specdash.bench.sweep_data import SweepConfig
from specdash.config import Config, HostConfig, SlurmConfig
from specdash.phases import Phase
from specdash.remote.ssh import SSHHost, SSHOptions
from specdash.server.remote_session import RemoteSession
from specdash.ui.fleet import FleetApp, FleetScreen
from specdash.ui.screens.dashboard import DashboardScreen
from tests.integration.conftest import target
from tests.integration.test_slurm import slurm_config
from tests.support.eventually import eventually
from tests.support.ports import free_port
from tests.support.settle import on_screen
from tests.support.slurm import SlurmCluster
from tests.support.sshd import Sshd


def row_text(app: FleetApp, i: int) -> str:
    table = app.fleet.query_one(DataTable)
    return " | ".join(str(c) for c in table.get_row_at(i))


async def test_the_fleet_shows_one_row_per_host_and_opens_each_dashboard(
    sshd: Sshd, ssh_options: SSHOptions, slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    slurm_cluster.wait_idle()
    port, job_port = free_port(), free_port()
    cfg = slurm_config(tmp_path, port=port)
    base = f"~/.specdash-tests/fleet-{uuid.uuid4().hex[:10]}"
    plain = HostConfig(name="gpu-a", address=target(sshd), state_dir=f"{base}/a")
    idle = HostConfig(name="gpu-b", address=target(sshd), state_dir=f"{base}/b")
    login = HostConfig(
        name="cluster",
        address=target(sshd),
        state_dir=f"{base}/c",
        env=slurm_cluster.env,
        slurm=SlurmConfig(partition="gpu", nodes=2, output_dir=f"{base}/jobs", dist_port=free_port()),
    )
    dead_port = free_port()  # nothing listens there
    dead = HostConfig(name="gone", address=f"specdash-test@127.0.0.1:{dead_port}", state_dir=f"{base}/d")
    quick = replace(ssh_options, connect_timeout=2.0)
    sessions = [
        RemoteSession(SSHHost(hc.address, quick), hc, cfg if hc is not login else job_cfg(cfg, job_port))
        for hc in (plain, idle, login, dead)
    ]
    sessions[2].sweep_defaults = SweepConfig(
        requests_per_level=3, warmup_requests=1, processes=0, settings=ProbeSettings(output_len=24)
    )
    app = FleetApp(sessions, tick=1.0)
    async with app.run_test(size=(100, 30)) as pilot:
        await on_screen(app, FleetScreen)
        assert app.fleet.query_one(DataTable).row_count == 4
        # The dead host fails its own row; the others connect regardless.
        await eventually(lambda: row_text(app, 3), until=lambda t: "failed" in t, timeout=30, what="dead row")
        # Its alert is cut to the column; the line under the table says it whole for the highlighted host.
        app.fleet.query_one(DataTable).move_cursor(row=3)
        await pilot.pause()
        alert = app.hosts[3].row.alert
        assert alert.startswith("cannot reach") and alert not in row_text(app, 3), (alert, row_text(app, 3))
        assert str(app.fleet.query_one("#fleet-detail", Static).render()).startswith(f"gone: {alert}")
        await eventually(
            lambda: [h.row.link for h in app.hosts[:3]],
            until=lambda v: v == ["connected"] * 3,
            timeout=30,
            what="three connected",
        )
        await sessions[0].start("baseline")
        # The two-node job from the cluster's dashboard, by keys: highlight mode 1, start it.
        app.fleet.query_one(DataTable).move_cursor(row=2)
        await pilot.press("enter")
        await pilot.pause()
        assert (await on_screen(app, DashboardScreen)).session is sessions[2]
        await pilot.press("1", "s")
        await eventually(lambda: row_text(app, 2), until=lambda t: "ready | 2/2" in t, timeout=120, what="job ready")
        # Swept from the dashboard: `b`, one level.
        await pilot.press("b")
        await pilot.pause()
        app.screen.query_one(Input).value = "1"
        await pilot.press("enter")
        await eventually(lambda: sessions[2].results.get("baseline"), timeout=120, what="the job's sweep")
        assert [lv.status for lv in sessions[2].results["baseline"].levels] == ["done"]
        await eventually(lambda: sessions[2].sweep_running(), until=lambda r: not r, timeout=30, what="sweep end")
        await pilot.press("backspace")
        await pilot.pause()
        await on_screen(app, FleetScreen)
        app.fleet.query_one(DataTable).move_cursor(row=0)
        await eventually(lambda: row_text(app, 0), until=lambda t: "| ready |" in t, timeout=120, what="gpu-a ready")
        await eventually(lambda: row_text(app, 2), until=lambda t: "ready | 2/2" in t, timeout=120, what="job ready")
        assert "gpu-b" in row_text(app, 1) and "failed" not in row_text(app, 1)
        shots = os.environ.get("SPECDASH_SHOTS")
        if shots:
            for size in ((80, 24), (100, 30), (160, 45)):
                await pilot.resize_terminal(*size)
                await pilot.pause()
                app.fleet.redraw(force=True)
                await pilot.pause()
                app.save_screenshot(f"fleet-{size[0]}x{size[1]}.svg", path=shots)
            await pilot.resize_terminal(100, 30)
        # enter opens the highlighted host's dashboard; ] cycles; backspace goes back.
        await pilot.press("enter")
        await pilot.pause()
        assert (await on_screen(app, DashboardScreen)).session is sessions[0]
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert (await on_screen(app, DashboardScreen)).session is sessions[1]
        await pilot.press("backspace")
        await pilot.pause()
        await on_screen(app, FleetScreen)
        if shots:
            app.fleet.query_one(DataTable).move_cursor(row=2)
            await pilot.press("enter")
            await pilot.pause(0.5)
            app.save_screenshot("fleet-job-dashboard-100x30.svg", path=shots)
            await pilot.press("backspace")
        # The job stopped from its dashboard: `x`, confirmed; scancel, confirmed by the job's end.
        job = sessions[2].status.job_id
        app.open_host(2)
        await pilot.pause()
        await pilot.press("x")
        await pilot.pause()
        await pilot.press("y")
        await sessions[2].wait_status([Phase.STOPPED], timeout=60)
        assert slurm_cluster.job_state(job) in ("CANCELLED", "COMPLETED")
        await sessions[0].stop()
        await pilot.press("q")


def job_cfg(cfg: Config, port: int) -> Config:
    """The same modes (the job's port differs from the plain host's: both serve on this machine)."""
    return replace(cfg, modes={n: replace(m, port=port) for n, m in cfg.modes.items()})
