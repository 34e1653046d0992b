"""`specdash bench`'s exit status: a sweep that stopped early exits 1 and says which mode and why."""

from __future__ import annotations

import pytest

from specdash.bench.sweep_data import SweepResult
from specdash.cli.bench import _exit_status


def test_a_sweep_that_stopped_early_exits_1_naming_the_mode_and_why(capsys: pytest.CaptureFixture[str]) -> None:
    results = [
        ("baseline", SweepResult(run_id=1, levels=(), aborted=None)),
        ("eagle3", SweepResult(run_id=2, levels=(), aborted="link lost: connection reset")),
    ]
    assert _exit_status(results) == 1
    err = capsys.readouterr().err
    assert err == "specdash: error: the sweep of eagle3 stopped: link lost: connection reset\n"


def test_sweeps_that_ran_to_the_end_exit_0_and_print_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit_status([("baseline", SweepResult(run_id=1, levels=(), aborted=None))]) == 0
    assert capsys.readouterr() == ("", "")
