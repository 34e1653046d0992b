"""The suite's own scheduling helpers: the machine lock of `exclusive_cpu` tests, and the slowest-first file order."""

from __future__ import annotations

import fcntl
import threading
import time

import pytest

from tests.support import cpu_lock, durations
from tests.support.cpuhog import cpu_hog


@pytest.fixture
def workers(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
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
            time.sleep(0.2)  # long enough for a late shared holder to try to get in, if it could
            events.append("exclusive out")

    first = threading.Thread(target=shared, args=("first", shared_in))
    first.start()
    assert shared_in.wait(10)
    alone = threading.Thread(target=exclusive)
    alone.start()
    assert _gate_taken_within(10), "the exclusive holder never reached the gate"
    late = threading.Thread(target=shared, args=("late",))
    late.start()
    release_shared.set()
    for t in (first, alone, late):
        t.join(10)
    assert events == ["first in", "first out", "exclusive in", "exclusive out", "late in", "late out"], events


def _gate_taken_within(seconds: float) -> bool:
    """Whether someone holds the gate (the exclusive holder, waiting for the shared ones), polled to a deadline."""
    paths = cpu_lock._paths()
    assert paths is not None
    deadline = time.monotonic() + seconds
    with open(paths[0], "a") as gate:
        while time.monotonic() < deadline:
            try:
                fcntl.flock(gate, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(gate, fcntl.LOCK_UN)
            time.sleep(0.01)
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
