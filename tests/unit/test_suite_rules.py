"""The suite's own rules: the machine lock of `exclusive_cpu` tests, the slowest-first file order, and a unit tier
that starts no process."""

from __future__ import annotations

import ast
import fcntl
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import cpu_lock, durations
from tests.support.cpuhog import cpu_hog
from tests.support.eventually import eventually_sync


@pytest.fixture
def workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretend to be one of several xdist workers, with a lock of this test's own."""
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "4")
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", f"unit-{time.monotonic_ns()}")
    monkeypatch.delenv(cpu_lock.EXCLUSIVE_ENV, raising=False)


@pytest.mark.usefixtures("workers")
def test_an_exclusive_holder_waits_for_the_shared_ones_and_holds_new_ones_back() -> None:
    events: list[str] = []
    shared_in = threading.Event()
    release_shared = threading.Event()

    def shared(name: str, ready: threading.Event | None = None) -> None:
        with cpu_lock.hold(exclusive=False):
            events.append(f"{name} in")
            if ready is not None:
                ready.set()
                assert release_shared.wait(10)
            events.append(f"{name} out")

    def exclusive() -> None:
        with cpu_lock.hold(exclusive=True):
            events.append("exclusive in")
            events.append("exclusive out")

    first = threading.Thread(target=shared, args=("first", shared_in))
    first.start()
    assert shared_in.wait(10)
    alone = threading.Thread(target=exclusive)
    alone.start()
    eventually_sync(_gate_taken, timeout=10, what="the exclusive holder waiting at the gate")
    late = threading.Thread(target=shared, args=("late",))
    late.start()
    release_shared.set()
    for t in (first, alone, late):
        t.join(10)
    assert events == ["first in", "first out", "exclusive in", "exclusive out", "late in", "late out"], events


def _gate_taken() -> bool:
    """Whether someone holds the gate (the exclusive holder, waiting for the shared ones)."""
    paths = cpu_lock._paths()
    assert paths is not None
    with open(paths[0], "a") as gate:
        try:
            fcntl.flock(gate, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(gate, fcntl.LOCK_UN)
        return False


def test_outside_xdist_there_is_no_lock_to_take(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_TESTRUNUID", raising=False)
    assert not cpu_lock.under_workers()
    with cpu_lock.hold(exclusive=True), cpu_lock.hold(exclusive=True):
        pass  # no lock at all: holding twice in one process does not block


@pytest.mark.usefixtures("workers")
def test_a_cpu_hog_beside_other_workers_tests_is_refused() -> None:
    with pytest.raises(RuntimeError, match="exclusive_cpu"), cpu_hog(True, seconds=1):
        pass
    with cpu_hog(False):
        pass  # no hog, nothing to refuse


def test_files_go_longest_first_and_an_unlisted_one_counts_as_the_median() -> None:
    table = {"a.py": 10.0, "b.py": 300.0, "c.py": 50.0, "d.py": 20.0}  # median 35
    rank = durations.order(["a.py", "a.py", "new.py", "c.py", "b.py"], table)
    assert sorted(rank, key=rank.__getitem__) == ["b.py", "c.py", "new.py", "a.py"]
    assert durations.order(["x.py", "y.py"], {}) == {"x.py": 0, "y.py": 1}


UNIT = Path(__file__).resolve().parent
STARTS = {"run", "Popen", "call", "check_call", "check_output", "create_subprocess_exec", "create_subprocess_shell"}


def process_starts(source: str, name: str) -> list[str]:
    """Where `source` starts a process (subprocess, asyncio's) or reaches for the test sshd."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in STARTS and isinstance(node.value, ast.Name):
            if node.value.id in {"subprocess", "asyncio"}:
                found.append(f"{name}:{node.lineno} {node.value.id}.{node.attr}")
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith(("support.sshd", "integration.conftest")):
            found.append(f"{name}:{node.lineno} imports {node.module}")
        if isinstance(node, ast.arg) and node.arg == "sshd":
            found.append(f"{name}:{node.lineno} takes the sshd fixture")
    return found


def test_the_unit_tier_starts_no_process_and_no_sshd() -> None:
    """unit/ is logic in this process: a test that starts a process (subprocess, asyncio's) or an sshd lives in
    integration/. (Checked in the source: a library's own helper process, matplotlib's fc-list, is not ours.)"""
    found = [hit for path in sorted(UNIT.glob("test_*.py")) for hit in process_starts(path.read_text(), path.name)]
    assert not found, found


def test_the_rule_sees_a_process_started_the_usual_ways() -> None:
    sample = (
        "import subprocess, asyncio\nfrom tests.support.sshd import Sshd\nsubprocess.run(['x'])\n"
        "asyncio.create_subprocess_exec('x')\nasyncio.sleep(1)\ndef test_x(sshd): pass\n"
    )
    assert sorted(process_starts(sample, "t.py")) == [
        "t.py:2 imports tests.support.sshd",
        "t.py:3 subprocess.run",
        "t.py:4 asyncio.create_subprocess_exec",
        "t.py:6 takes the sshd fixture",
    ]


def in_every_test(finder: Callable[[str, str], list[str]]) -> list[str]:
    """What `finder(source, name)` finds in every test file of the suite (names relative to `tests/`)."""
    tests = UNIT.parent
    return [
        hit
        for path in sorted(tests.rglob("test_*.py"))
        for hit in finder(path.read_text(), str(path.relative_to(tests)))
    ]


def rack_reads(source: str, name: str) -> list[str]:
    """Where `source` reads Textual's toast rack (`app._notifications`)."""
    tree = ast.parse(source)
    return [
        f"{name}:{node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr == "_notifications"
    ]


def test_tests_read_what_the_app_said_not_the_toast_rack() -> None:
    """The rack takes a notice only when the app handles its message and drops it after its timeout: read right
    after a key press on a loaded machine it held two of three (ci23). Tests record `notify` calls instead
    (tests/support/notices.py)."""
    found = in_every_test(rack_reads)
    assert not found, found
    assert rack_reads("x = app._notifications\nlen(self.app._notifications)\n", "t.py") == ["t.py:1", "t.py:2"]


def screen_asserts(source: str, name: str) -> list[str]:
    """`assert isinstance(app.screen, X)` with nothing else in the assertion, as `file:line`."""
    tree = ast.parse(source)
    return [
        f"{name}:{node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Assert)
        and isinstance(node.test, ast.Call)
        and isinstance(node.test.func, ast.Name)
        and node.test.func.id == "isinstance"
        and isinstance(node.test.args[0], ast.Attribute)
        and node.test.args[0].attr == "screen"
    ]


def test_tests_wait_for_a_screen_a_key_pushes() -> None:
    """A key that pushes or pops a screen has done so once the app has handled the message it posted, which under
    load is after `pilot.press` returns (ci30: `m`'s confirmation was not up yet under six workers and two CPU
    hogs). Tests wait for it (`tests.support.settle.on_screen`) instead of asserting it at once."""
    found = in_every_test(screen_asserts)
    assert not found, found
    sample = "assert isinstance(app.screen, ConfirmScreen)\nassert isinstance(app.screen, X) and ok\n"
    assert screen_asserts(sample, "t.py") == ["t.py:1"]
