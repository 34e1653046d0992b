"""A sweep through the WAN rig (tests/support/wan.py: 40 ms ± 4 ms each way, 50 Mbit/s) against the simulator inside
the namespace, checked against the simulator's own per-request log.

What must hold whatever the machine's load (only lower bounds on time): every request the client completed
is in the server's log once, and through the tunnel every TTFT carries at least one round trip of the link,
so the client's TTFT percentiles sit at least 2 x (delay - jitter) above the server's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from specdash.bench.probe import ProbeSettings
from specdash.bench.prompts import load_prompts
from specdash.bench.store import Store
from specdash.bench.summary import summarize
from specdash.bench.sweep import SweepConfig, run_sweep
from specdash.remote.ssh import SSHHost, SSHOptions
from tests.support.netns import Netns
from tests.support.sshd import Keys
from tests.support.wan import DELAY_S, JITTER_S, WanHost, read_truth, tc, truth_samples, wan_host

pytestmark = pytest.mark.netns


@pytest.fixture
def wan(netns: Netns, ssh_keys: Keys, ssh_options: SSHOptions, tmp_path: Path) -> Iterator[WanHost]:
    with wan_host(netns, ssh_keys, ssh_options, tmp_path) as host:
        yield host


def test_the_link_is_rate_limited_both_ways(wan: WanHost) -> None:
    for dev, where in ((wan.ns.root_if, None), (wan.ns.ns_if, wan.ns.name)):
        tc("qdisc", "show", "dev", dev, netns=where)  # raises when the device is gone
    shown = wan.ns.exec("tc", "qdisc", "show", "dev", wan.ns.ns_if).stdout
    assert "tbf" in shown and "50Mbit" in shown


async def test_a_sweep_through_the_rig_matches_the_servers_log_plus_the_round_trip(wan: WanHost) -> None:
    log = wan.directory / "requests.jsonl"
    port = wan.start_sim(request_log=log)
    async with SSHHost(wan.address, wan.options) as host:
        local = await host.forward(port)
        config = SweepConfig(
            mode="baseline",
            levels=(1, 4),
            requests_per_level=8,
            settings=ProbeSettings(output_len=24),
            processes=0,
        )
        store = Store(":memory:")
        result = await run_sweep(f"http://127.0.0.1:{local}", config, load_prompts("chat"), store)
    assert [lv.status for lv in result.levels] == ["done", "done"]
    records = read_truth(log)
    for level in result.levels:
        assert result.run_id is not None and level.level_id is not None
        samples = store.samples(result.run_id, level.level_id)
        assert len(samples) == 8 and all(s.ok for s in samples)
        truth = truth_samples(records, samples)
        assert len(truth) == len(samples)  # the server saw each of the level's requests once
        assert sum(t.output_tokens for t in truth) == sum(s.output_tokens for s in samples)
        seen, real = level.stats, summarize(truth, level.concurrency)
        floor = 2 * (DELAY_S - JITTER_S) * 1000
        for q in ("p50", "p90", "p99"):
            assert getattr(seen.ttft_ms, q) >= getattr(real.ttft_ms, q) + floor, (q, seen.ttft_ms, real.ttft_ms)
