"""The dashboard over real parts: the embedded SSH server, the SSH client path, the simulator, real sweeps.

These are pilot tests (`App.run_test`) of the app exactly as `specdash demo` builds it, at a short time
scale. Waiting is on the session's own state (`wait_status`, worker completion), never on sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import DataTable, Label

from specdash.cli.demo_session import demo_session
from specdash.config import Config, HostConfig
from specdash.core.events import GreedyUpdate
from specdash.phases import Phase
from specdash.remote.ssh import SSHHost, SSHOptions
from specdash.server.remote_session import RemoteSession
from specdash.ui.app import SpecdashApp, make_app
from specdash.ui.screens.confirm import ConfirmScreen, LevelsScreen
from specdash.ui.widgets.gpu import GpuPanel
from specdash.ui.widgets.logview import LogView
from tests.integration.conftest import target
from tests.support.sshd import Sshd

SIZE = (160, 45)
FAST = 0.01  # 550 s x 0.01: a simulated start in about 6 s


@contextlib.asynccontextmanager
async def live_demo() -> AsyncIterator[tuple[RemoteSession, SpecdashApp, Pilot[None], Waker]]:
    """`specdash demo`'s session and app, running headless and attached to the (idle) embedded host."""
    async with demo_session(FAST) as demo:
        app = make_app(demo.session)
        async with app.run_test(size=SIZE) as pilot:
            wake = Waker(demo.session, pilot)
            await asyncio.wait_for(demo.session.attached.wait(), 30)
            yield demo.session, app, pilot, wake


def text(app: SpecdashApp, selector: str) -> str:
    return str(app.screen.query_one(selector, Label).render())


class Waker:
    """Wakes a waiting test on every session event; the app then processes its messages before checking."""

    def __init__(self, session: RemoteSession, pilot: Pilot[None]) -> None:
        self.pilot = pilot
        self.event = asyncio.Event()
        session.subscribe(lambda _event: self.event.set())

    async def until(self, predicate: Callable[[], bool], timeout: float = 60.0) -> None:
        async with asyncio.timeout(timeout):
            await self.pilot.pause()
            while not predicate():
                self.event.clear()
                # A key press changes the screen without a session event: check again after a short wait.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.event.wait(), 0.5)
                await self.pilot.pause()


async def test_start_watch_sweep_switch_over_the_real_stack() -> None:
    async with live_demo() as (session, app, pilot, wake):
        await wake.until(lambda: text(app, "#connection") == "● connected")
        assert "STOPPED" in text(app, "#server-state")

        await pilot.press("1", "s")  # baseline
        phases_seen: set[str] = set()

        def watch_phases() -> bool:
            phases_seen.add(text(app, "#server-state"))
            return session.status.phase is Phase.READY

        await wake.until(watch_phases)
        await pilot.pause()
        assert "READY" in text(app, "#server-state")
        assert any("LOADING WEIGHTS" in p or "CAPTURING" in p for p in phases_seen), phases_seen
        shown = app.screen.query_one(LogView).shown
        assert any("fired up and ready to roll" in line.text for line in shown)
        # The demo's host serves the simulator's nvidia-smi: the GPU panel shows the 8 GPUs the TP=8 server
        # holds, through the same poll a real host gets.
        gpus = app.screen.query_one("#gpus", GpuPanel)
        await wake.until(lambda: gpus.stats is not None and len(gpus.stats.gpus) == 8)
        assert gpus.display and gpus.stats is not None
        assert all(g.mem_used_mib > 0.5 * g.mem_total_mib for g in gpus.stats.gpus), gpus.stats

        await pilot.press("b")
        await wake.until(lambda: isinstance(app.screen, LevelsScreen))
        await pilot.press(*"\b" * 40)  # clear the default levels
        levels = app.screen.query_one("#levels")
        levels.value = "1,4"  # type: ignore[attr-defined]
        await pilot.press("enter")
        await wake.until(lambda: session.sweep_running())
        await wake.until(lambda: not session.sweep_running(), timeout=90)
        await pilot.pause()
        table = app.screen.query_one(DataTable)
        rows = [table.get_row_at(i) for i in range(table.row_count)]
        assert len(rows) == 2 and all("baseline" in map(str, row) for row in rows)
        assert session.results["baseline"].aborted is None

        await pilot.press("2", "m")  # switch to eagle3: a live server, so it asks first
        await wake.until(lambda: isinstance(app.screen, ConfirmScreen))
        assert "and start eagle3" in text(app, "#question")
        await pilot.press("y")
        await wake.until(lambda: session.status.mode == "eagle3" and session.status.phase is Phase.READY)
        assert "eagle3" in text(app, "#engine")


async def test_a_second_ab_keeps_the_chosen_reference_with_the_other_mode_live() -> None:
    """An A/B of baseline and eagle3 run while eagle3 is live (as after a first A/B) measures eagle3 first
    (no restart) but keeps baseline the reference: in the verdict and in the greedy check."""
    async with live_demo() as (session, app, pilot, wake):
        greedy: list[GreedyUpdate] = []
        session.subscribe(lambda e: greedy.append(e) if isinstance(e, GreedyUpdate) and not e.running else None)
        await pilot.press("2", "s")  # eagle3 live, as the first A/B leaves it
        await wake.until(lambda: session.status.phase is Phase.READY)
        await pilot.press("1", "space", "2", "space", "a")
        await wake.until(lambda: isinstance(app.screen, LevelsScreen))
        app.screen.query_one("#levels").value = "1,8"  # type: ignore[attr-defined]
        await pilot.press("enter")
        await wake.until(lambda: isinstance(app.screen, ConfirmScreen))
        assert "measures eagle3 as it runs" in text(app, "#question")
        await pilot.press("y")
        await wake.until(lambda: session.sweep_running())
        try:
            await wake.until(lambda: not session.sweep_running(), timeout=120)
            assert list(session.results) == ["eagle3", "baseline"]  # the live mode first: an order
            verdict = text(app, "#bench-verdict")
            assert verdict.startswith("▶ eagle3 ") and "baseline" in verdict, verdict
            assert {u.reference for u in greedy} == {"baseline"}, greedy
        finally:
            await session.stop()


async def test_a_cancelled_sweep_stops_its_probe_and_says_it_stopped() -> None:
    """Cancelling a sweep (the key, quitting, a key that stops the tour) stops the probe with it: the stored
    run is `interrupted` when the cancel returns and the table says "stopped", not "running · 1/3 levels"."""
    from specdash.core.events import BenchUpdate

    async with live_demo() as (session, app, pilot, wake):
        updates: list[BenchUpdate] = []
        session.subscribe(lambda e: updates.append(e) if isinstance(e, BenchUpdate) else None)
        await session.start("baseline")
        await wake.until(lambda: session.status.phase is Phase.READY)
        try:
            sweep = asyncio.create_task(session.sweep(["baseline"], [1, 2, 4]))
            await wake.until(lambda: any(r.status == "done" for u in updates for r in u.rows), timeout=90)
            await session.cancel_sweep()
            assert sweep.done()
            store = session.store
            assert store is not None
            assert store.runs()[0].status == "interrupted"
            last = updates[-1]
            assert not last.running and not any(r.status in ("warmup", "running") for r in last.rows), last
            await pilot.pause()
            border = str(app.screen.query_one("#bench-table", DataTable).border_subtitle)
            assert border.startswith("stopped"), border
        finally:
            await session.stop()


async def test_crash_fault_is_shown_with_its_line() -> None:
    async with live_demo() as (session, app, pilot, wake):
        await pilot.press("3", "s")  # eagle3-dynamic: crashes once the batch passes 10
        await wake.until(lambda: session.status.phase is Phase.READY)
        await pilot.press("b")
        await wake.until(lambda: isinstance(app.screen, LevelsScreen))
        app.screen.query_one("#levels").value = "2,12"  # type: ignore[attr-defined]
        await pilot.press("enter")
        await wake.until(lambda: session.status.phase is Phase.CRASHED, timeout=90)
        await pilot.pause()
        assert "RuntimeError: The size of tensor a (160) must match the size of tensor b (2)" in text(app, "#crash")
        await wake.until(lambda: not session.sweep_running(), timeout=30)
        rows = {(r.concurrency, r.status) for r in session._rows.values()}
        assert (2, "done") in rows and (12, "failed") in rows  # the level in flight failed; C=2 is kept
        # The crash stands where it happened: the table's border, its notes, the store (`compare`, the report).
        await pilot.pause()
        table = app.screen.query_one("#bench-table", DataTable)
        assert str(table.border_subtitle).startswith("crashed at eagle3-dynamic C=12"), table.border_subtitle
        notes = text(app, "#bench-notes")
        assert notes.startswith("✗ eagle3-dynamic crashed at C=12: RuntimeError: The size of tensor a (160)"), notes
        await _crash_in_compare_and_report(session)


async def _crash_in_compare_and_report(session: RemoteSession) -> None:
    from specdash.bench.run_data import alarms, load_run
    from specdash.bench.text_tables import compare_table
    from specdash.report.html import build_report

    store = session.store
    assert store is not None
    run = load_run(store, store.runs()[0].id)
    assert run.mode == "eagle3-dynamic"
    why = run.failures()[12]
    assert why.startswith("server crashed: RuntimeError: The size of tensor a (160)"), why
    table = compare_table([run.mode], [run.curve()], [run.failures()])
    assert any(line.split()[:2] == ["12", "✗"] for line in table.splitlines()), table
    assert f"eagle3-dynamic C=12 failed: {why}" in alarms([run])
    html = build_report([run]).html
    assert "failed: server crashed: RuntimeError: The size of tensor a (160)" in html


async def test_connection_lost_and_regained_in_the_header(
    make_sshd: Callable[..., Sshd], ssh_options: SSHOptions, tmp_path: Path
) -> None:
    server = make_sshd("ui-flaky")
    known = tmp_path / "known_hosts"
    known.write_text(server.known_hosts_line() + "\n")
    options = replace(ssh_options, known_hosts=known, keepalive_interval=0.5)
    address = target(server)
    host_config = HostConfig(name="flaky", address=address, state_dir=f"~/.specdash-tests/{uuid.uuid4().hex}")
    session = RemoteSession(SSHHost(address, options), host_config, Config(path=None, hosts={}, modes={}))
    app = make_app(session)
    async with app.run_test(size=SIZE) as pilot:
        wake = Waker(session, pilot)
        await wake.until(lambda: text(app, "#connection") == "● connected")
        server.stop()
        await wake.until(lambda: "lost" in text(app, "#connection"), timeout=20)
        assert app.screen.query_one("#connection").has_class("-lost")
        server.start()
        await wake.until(lambda: text(app, "#connection") == "● connected", timeout=30)
        assert session.host.generation == 2


async def test_greedy_key_over_the_real_stack_finds_a_lossy_verify_step(
    sshd: Sshd, ssh_options: SSHOptions, tmp_path: Path
) -> None:
    """The greedy check and the SLO against the simulator over the real sshd: an A/B stores baseline's outputs as the
    reference and shows the mode with the `spec-diverge` fault as a finding with its first difference; key `o`
    on eagle3 then matches baseline's stored outputs without restarting baseline; every output is stored."""
    from specdash.bench.probe import ProbeSettings
    from specdash.bench.store import Store
    from specdash.bench.sweep_data import SweepConfig
    from specdash.slo import parse_slo
    from tests.support.ports import free_port
    from tests.support.remote_sim import sim_config

    diverge = '[modes.diverge]\nextends = "eagle3"\nargs = ["--sim-fault", "spec-diverge=5"]\n'
    cfg = sim_config(tmp_path, port=free_port(), time_scale=FAST, extra_modes=diverge)
    host_cfg = HostConfig(name="sim-host", address=target(sshd), state_dir=f"~/.specdash-tests/{uuid.uuid4().hex}")
    store = Store(tmp_path / "bench.db")
    slo = parse_slo("ttft_p90=5s,tpot_p90=1s")  # the dashboard's sweeps are judged against `[bench] slo`
    defaults = SweepConfig(progress_interval_s=0.25, settings=ProbeSettings(output_len=24), slo=slo)
    session = RemoteSession(
        SSHHost(target(sshd), ssh_options), host_cfg, cfg, store=store, sweep_defaults=defaults, greedy_prompts=4
    )
    app = make_app(session)
    async with app.run_test(size=SIZE) as pilot:
        wake = Waker(session, pilot)
        ended: list[GreedyUpdate] = []
        session.subscribe(lambda e: ended.append(e) if isinstance(e, GreedyUpdate) and not e.running else None)
        await asyncio.wait_for(session.attached.wait(), 30)
        try:

            async def check(mode: str) -> str:
                if session.status.mode != mode:
                    await session.switch(mode)
                await wake.until(lambda: session.status.mode == mode and session.status.phase is Phase.READY)
                before = len(ended)
                await pilot.press("o")
                await wake.until(lambda: len(ended) > before and app.screen.check_action("greedy", ()) is True)
                return text(app, "#bench-greedy")

            # An A/B checks each mode while it is live: baseline's outputs become the reference, and the
            # lossy mode is a finding with its first difference.
            await session.sweep(["baseline", "diverge"], [1])
            await wake.until(lambda: len(ended) == 2)
            assert "baseline's outputs for 4 prompts are stored as the reference" in ended[0].note
            lossy = text(app, "#bench-greedy")
            assert lossy.startswith("⚠ greedy check diverge vs baseline: 0/4 outputs identical; first difference"), (
                lossy
            )
            assert "prompt 0, character" in lossy
            # The SLO: attainment and goodput per level, the largest C per mode in the verdict.
            table = app.screen.query_one("#bench-table", DataTable)
            assert [str(c.label) for c in table.columns.values()][-2:] == ["SLO", "goodput"]
            assert {str(table.get_row_at(i)[-2]) for i in range(table.row_count)} == {"✓100%"}
            verdict = text(app, "#bench-verdict")
            assert "Under the SLO (ttft_p90≤5000ms, tpot_p90≤1000ms): baseline up to C=1, diverge up to C=1" in verdict
            assert app.screen.query_one("#bench-greedy").has_class("-finding")
            # The key on another mode compares with baseline's stored outputs: no restart of baseline.
            same = await check("eagle3")
            assert same.startswith("✓ greedy check eagle3 vs baseline: 4/4 outputs identical"), same
            assert not app.screen.query_one("#bench-greedy").has_class("-finding")
            assert session.status.mode == "eagle3"
        finally:
            await session.stop()
    rows = store._fetchall("SELECT mode, outputs FROM greedy_outputs ORDER BY id")
    assert [r["mode"] for r in rows] == ["baseline", "diverge", "eagle3"]
    assert all(len(json.loads(r["outputs"])) == 4 for r in rows)
    store.close()
