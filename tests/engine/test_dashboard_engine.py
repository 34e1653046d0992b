"""The dashboard against the real vLLM CPU engine over a real sshd, driven from the keyboard (issue 16).

The Textual app exactly as `specdash connect` builds it (`make_app` on a `RemoteSession` with a store), run
headless (`App.run_test`): start `plain`, mark `plain` and `ngram`, run an A/B sweep, then read what a user
reads: the verdict line, the speedup (×) column, the acceptance line (vLLM's own spec-decode counters), and
the curves chart's speedup and Pareto views, and the greedy spot check (after each mode of the A/B and on
key `o`). Then `specdash bench --url` against the live ngram server
stores the server's command line read from /proc (issue 16, point 6), and `x` stops the server.

Every figure asserted is checked against what the session measured (its `results`), not against a speed:
the machine is shared. SVG screenshots (100x30 and 160x45) go to `.engine/results/screens/`, and PNGs beside
them when `rsvg-convert` is installed.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from textual.pilot import Pilot
from textual.widgets import DataTable

from specdash.bench.probe import ProbeSettings
from specdash.bench.store import Store
from specdash.bench.sweep_data import SweepConfig
from specdash.config import HostConfig
from specdash.core.acceptance import acceptance_line
from specdash.core.events import GreedyUpdate
from specdash.core.verdict import verdict
from specdash.phases import Phase
from specdash.remote.ssh import SSHHost, SSHOptions
from specdash.server.remote_session import RemoteSession
from specdash.ui.app import SpecdashApp, make_app
from specdash.ui.screens.confirm import ConfirmScreen, LevelsScreen
from specdash.ui.widgets.charts import CurvesChart
from tests.engine.conftest import ENGINE_PYTHON, RESULTS_DIR
from tests.engine.test_vllm_engine import START_TIMEOUT_S, engine_config
from tests.integration.conftest import target
from tests.integration.test_dashboard_live import Waker, text
from tests.support.ports import free_port
from tests.support.sshd import Keys, Sshd

pytestmark = pytest.mark.engine

SIZES = ((160, 45), (100, 30))
LEVELS = "1,4"
OUTPUT_LEN = 32
REQUESTS = 8
SWEEP_TIMEOUT_S = 1200.0
"""Both modes' levels plus the restart into ngram, on a shared 2-core machine."""
SCREENS = RESULTS_DIR / "screens"
GREEDY_N = 4
"""Prompts of the greedy spot check: after each mode of the A/B, and on key `o`."""


def save_svg(svg: str, name: str) -> str:
    """Write the screenshot and, with rsvg-convert, a PNG beside it (Textual writes `&#160;` for spaces, which
    rsvg draws as boxes); returns the screen's text with the spaces restored."""
    SCREENS.mkdir(parents=True, exist_ok=True)
    fixed = svg.replace("&#160;", " ")
    (SCREENS / f"{name}.svg").write_text(svg)
    tool = shutil.which("rsvg-convert")
    if tool is not None:
        (SCREENS / f"{name}.fixed.svg").write_text(fixed)
        subprocess.run([tool, str(SCREENS / f"{name}.fixed.svg"), "-o", str(SCREENS / f"{name}.png")], check=True,
                       timeout=60)  # fmt: skip
        (SCREENS / f"{name}.fixed.svg").unlink()
    return fixed


async def shoot(app: SpecdashApp, pilot: Pilot[None], name: str) -> list[str]:
    """Screenshots at every size in `SIZES`; returns the screens' text (spaces restored) for assertions."""
    texts = []
    for width, height in SIZES:
        await pilot.resize_terminal(width, height)
        await pilot.pause()
        texts.append(save_svg(app.export_screenshot(), f"{name}-{width}x{height}"))
    await pilot.resize_terminal(*SIZES[0])
    await pilot.pause()
    return texts


@pytest_asyncio.fixture
async def session(
    engine_ready: Path, sshd: Sshd, ssh_keys: Keys, tmp_path: Path
) -> AsyncIterator[tuple[RemoteSession, Path]]:
    """A session on the test host with the `plain` and `ngram` modes and a store, as `connect` makes it; the
    sweep settings are bounded (short outputs, few requests) but the endpoint follows the engine as there."""
    known = tmp_path / "known_hosts"
    known.write_text(sshd.known_hosts_line() + "\n")
    (tmp_path / "ssh_config").write_text("")
    options = SSHOptions(
        identity_files=(ssh_keys.client_key,), known_hosts=known, ssh_config=tmp_path / "ssh_config",
        use_agent=False, connect_timeout=5.0, backoff_initial=0.05,
    )  # fmt: skip
    host_cfg = HostConfig(
        name="workstation",
        address=target(sshd),
        python=str(ENGINE_PYTHON),
        state_dir=f"~/.specdash-tests/{tmp_path.name}",
    )
    db = tmp_path / "runs.db"
    defaults = SweepConfig(
        progress_interval_s=0.25, endpoint_follows_engine=True, requests_per_level=REQUESTS,
        settings=ProbeSettings(output_len=OUTPUT_LEN, request_timeout_s=300.0),
    )  # fmt: skip
    store = Store(db)
    s = RemoteSession(
        SSHHost(target(sshd), options), host_cfg, engine_config(tmp_path, free_port()), store=store,
        sweep_defaults=defaults, greedy_prompts=GREEDY_N,
    )  # fmt: skip
    try:
        yield s, db
    finally:
        # Whatever the test left running: stop it over a fresh connection (the app closed its session).
        async with SSHHost(target(sshd), options) as host:
            probe = RemoteSession(host, host_cfg, s.config)
            record = await probe.lifecycle.current()
            if record is not None and record.alive:
                await probe.lifecycle.stop(record, grace=15)
        store.close()


async def bench_url(port: int, db: Path, tmp: Path) -> dict[str, Any]:
    """`specdash bench --url` against the live server on this machine's loopback; the stored provenance."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "specdash", "bench", "--url", f"http://127.0.0.1:{port}", "--mode", "ngram-by-url",
        "--levels", "1", "--requests-per-level", "2", "--output-len", "8", "--endpoint", "completions",
        "--db", str(db), "--json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "XDG_DATA_HOME": str(tmp / "data"), "no_proxy": "127.0.0.1,localhost"},
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 600)
    assert proc.returncode == 0, err.decode()[-3000:]
    run_id = json.loads(out)["run_id"]
    with Store(db) as store:
        record = store.run(run_id)
    assert record is not None
    return dict(record.meta.provenance or {})


async def test_ab_sweep_from_the_keyboard_against_vllm(session: tuple[RemoteSession, Path], tmp_path: Path) -> None:
    s, db = session
    app = make_app(s, live=False)  # charts drawn at once, no clock tick: every screenshot shows the state asserted
    greedy: list[GreedyUpdate] = []
    s.subscribe(lambda e: greedy.append(e) if isinstance(e, GreedyUpdate) and not e.running else None)
    async with app.run_test(size=SIZES[0]) as pilot:
        wake = Waker(s, pilot)
        await wake.until(lambda: text(app, "#connection") == "● connected", timeout=60)
        assert "STOPPED" in text(app, "#server-state")

        await pilot.press("1", "s")  # plain
        await wake.until(lambda: s.status.phase in (Phase.READY, Phase.CRASHED, Phase.EXITED), START_TIMEOUT_S)
        assert s.status.phase is Phase.READY and s.status.mode == "plain", s.status
        assert "READY" in text(app, "#server-state")
        await shoot(app, pilot, "1-plain-ready")

        # Mark both modes, A/B: plain is live, so it is measured as it runs, then the server restarts into ngram.
        await pilot.press("1", "space", "2", "space", "a")
        await wake.until(lambda: isinstance(app.screen, LevelsScreen))
        app.screen.query_one("#levels").value = LEVELS  # type: ignore[attr-defined]
        await pilot.press("enter")
        await wake.until(lambda: isinstance(app.screen, ConfirmScreen))
        question = text(app, "#question")
        assert question.startswith("A/B plain vs ngram") and "then restarts into ngram" in question, question
        await pilot.press("y")
        await wake.until(lambda: s.sweep_running(), timeout=30)
        await wake.until(lambda: (s.status.mode == "ngram" and s.status.phase is Phase.READY) or not s.sweep_running(),
                         timeout=SWEEP_TIMEOUT_S)  # fmt: skip
        await shoot(app, pilot, "2-ab-running-ngram")
        await wake.until(lambda: not s.sweep_running(), timeout=SWEEP_TIMEOUT_S)
        await pilot.pause()

        # What was measured, from the session's own results (the table and lines must say the same).
        assert set(s.results) == {"plain", "ngram"}, s.results
        tok_s = {m: {lv.concurrency: lv.stats.output_tok_s for lv in r.levels if lv.status == "done"}
                 for m, r in s.results.items()}  # fmt: skip
        assert set(tok_s["plain"]) == set(tok_s["ngram"]) == {1, 4}, s.results
        for r in s.results.values():
            assert all(lv.stats.failed == 0 and lv.stats.total_output_tokens == REQUESTS * OUTPUT_LEN
                       for lv in r.levels), r.levels  # fmt: skip
            assert r.run_id is not None  # stored

        # The verdict line: the whole sentence, never cut.
        expected_verdict = verdict({"plain": tok_s["plain"], "ngram": tok_s["ngram"]})
        assert expected_verdict and "ngram" in expected_verdict, expected_verdict
        assert text(app, "#bench-verdict") == f"▶ {expected_verdict}"

        # The speedup (×) column: ngram's tok/s over plain's at the same C; blank for the reference.
        table = app.screen.query_one("#bench-table", DataTable)
        cells = {(str(row[1]), int(str(row[2]))): [str(c) for c in row]
                 for row in (table.get_row_at(i) for i in range(table.row_count))}  # fmt: skip
        assert set(cells) == {("plain", 1), ("plain", 4), ("ngram", 1), ("ngram", 4)}, cells
        for c in (1, 4):
            assert cells[("plain", c)][4] == "", cells[("plain", c)]
            assert cells[("ngram", c)][4] == f"{tok_s['ngram'][c] / tok_s['plain'][c]:.2f}×", cells[("ngram", c)]
            assert cells[("ngram", c)][0] == cells[("plain", c)][0] == "✓"

        # The acceptance line: the newest finished speculative level (ngram C=4), from vLLM's counters.
        level = next(lv for lv in s.results["ngram"].levels if lv.concurrency == 4)
        accept = level.server.accept_length
        assert accept is not None and accept > 1.0, level.server  # 1 + Δaccepted / Δdrafts
        assert level.server.draft_share is not None and 0 < level.server.draft_share < 1
        line = text(app, "#bench-accept")
        assert line == acceptance_line("ngram", 4, accept, level.server.draft_share,
                                       level.server.accept_per_position), line  # fmt: skip
        assert line.startswith(f"acceptance · ngram C=4: {accept:.2f} tokens per verify step")
        assert "% of output from drafts" in line
        # The greedy check after each mode of the A/B: plain's outputs stored as the reference, then ngram's
        # compared with them at temperature 0 (a mismatch is a finding shown, not a failure).
        assert [(g.mode, g.reference) for g in greedy] == [("plain", "plain"), ("ngram", "plain")], greedy
        assert "stored as the reference" in greedy[0].note
        after_ab = greedy[1].check
        assert after_ab is not None and after_ab.total == GREEDY_N, greedy[1]
        shown = text(app, "#bench-greedy")
        assert shown.startswith(("✓ ", "⚠ ")) and after_ab.text.splitlines()[0] in shown, shown
        assert app.screen.query_one("#bench-greedy").has_class("-finding") is (after_ab.identical < GREEDY_N)
        shots = {"table": await shoot(app, pilot, "3-ab-done")}

        # Key `o` on the live ngram: its outputs again against plain's stored ones, no restart of plain.
        pid = s.status.pid
        await pilot.press("o")
        await wake.until(lambda: len(greedy) == 3, timeout=300)
        keyed = greedy[2].check
        assert keyed is not None and keyed.total == GREEDY_N and greedy[2].mode == "ngram", greedy[2]
        assert keyed.text.splitlines()[0] in text(app, "#bench-greedy")
        assert s.status.mode == "ngram" and s.status.pid == pid
        print(f"\ngreedy after the A/B: {after_ab.text}\ngreedy on key o: {keyed.text}")
        shots["greedy"] = await shoot(app, pilot, "3b-greedy-key")

        # The curves chart: tok/s by C, then `p` for the speedup view (1.0 line), then the Pareto view.
        chart = app.screen.query_one("#curves-chart", CurvesChart)
        assert str(chart.border_title).startswith("tok/s by concurrency")
        await pilot.press("p")
        await wake.until(lambda: str(chart.border_title).startswith("speedup"))
        shots["speedup"] = await shoot(app, pilot, "4-speedup")
        await pilot.press("p")
        await wake.until(lambda: str(chart.border_title).startswith("Pareto"))
        shots["pareto"] = await shoot(app, pilot, "5-pareto")
        for view, screens in shots.items():
            for screen in screens:
                assert "chart unavailable" not in screen, view
        wide = shots["speedup"][0]  # 160x45: the legends fit
        assert "ngram/plain" in wide
        assert "frontier" in shots["pareto"][0] and "C=1" in shots["pareto"][0] and "C=4" in shots["pareto"][0]
        print(f"\nverdict: {expected_verdict}\n{line}\n" + "\n".join(" | ".join(v) for v in cells.values()))

        # Provenance of a run specdash did not start: `bench --url` on the live ngram server's port, from here.
        assert s.status.phase is Phase.READY and s.status.mode == "ngram" and s.status.pid is not None
        port = s.config.mode("ngram").port
        prov = await bench_url(port, db, tmp_path)
        command = [str(a) for a in prov.get("command") or []]
        assert command[:3] == [str(ENGINE_PYTHON), "-m", "vllm.entrypoints.openai.api_server"], prov
        assert command[command.index("--port") + 1] == str(port) and "--speculative-config" in command, command
        assert prov["command_source"] == f"/proc/{s.status.pid}/cmdline: the process listening on 127.0.0.1:{port}"
        print(f"bench --url provenance: {prov['command_source']}\n  {' '.join(command)}")

        # `x` stops the server (it asks first).
        await pilot.press("x")
        await wake.until(lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wake.until(lambda: s.status.phase is Phase.STOPPED, timeout=120)
