"""The demo's port comes from below the kernel's ephemeral range, where no outgoing connection can take it
between two starts of the simulator (a tune restarts it once per setting), and never from the tests' ports."""

from __future__ import annotations

import random
import socket

import pytest

from specdash import ports
from tests.support import ports as test_ports


def test_the_demo_port_is_below_the_ephemeral_range_and_above_the_tests_ports() -> None:
    low = ports.ephemeral_low()
    assert low > ports.TESTS_BELOW, "this machine's ephemeral range leaves the demo no room; the test is moot"
    for _ in range(20):
        port = ports.free_port()
        assert ports.TESTS_BELOW <= port < low
    assert test_ports._BLOCK.stop <= ports.TESTS_BELOW


def test_a_port_something_listens_on_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        busy = held.getsockname()[1]
        assert not ports.is_free("127.0.0.1", busy)
        candidates = iter([[busy, *range(ports.TESTS_BELOW, ports.TESTS_BELOW + 63)]])
        monkeypatch.setattr(random, "sample", lambda population, k: next(candidates))
        port = ports.free_port()
    assert port != busy and ports.is_free("127.0.0.1", port)


def test_a_range_too_small_to_search_falls_back_to_the_kernels_port(monkeypatch: pytest.MonkeyPatch) -> None:
    kernels = ports.ephemeral_low()
    monkeypatch.setattr(ports, "ephemeral_low", lambda: ports.TESTS_BELOW + 3)
    assert ports.free_port() >= kernels  # the kernel's own choice: from its ephemeral range, not a search
