"""The client-limited rule (specdash.bench.headroom): a flag only on evidence, each with its bound."""

from __future__ import annotations

import pytest

from specdash.bench.headroom import LevelEvidence, Load, evidence, idle_share, judge, send_share
from specdash.bench.samples import RequestSample
from specdash.core.series import Window

MS = 1_000_000
IDLE = Load(cpu_share=0.2, lag_p90_ms=0.5, lag_p99_ms=1.0)


def sample(scheduled_ms: float, start_ms: float, end_ms: float) -> RequestSample:
    return RequestSample(
        index=0,
        prompt_index=0,
        worker=0,
        error=None,
        detail="",
        http_status=200,
        scheduled_ns=int(scheduled_ms * MS),
        start_ns=int(start_ms * MS),
        end_ns=int(end_ms * MS),
        first_token_ns=int(start_ms * MS) + MS,
        last_token_ns=int(end_ms * MS),
        output_tokens=10,
        requested_tokens=10,
        estimated=False,
        per_chunk_exact=True,
        chunk_offsets_us=(1000,),
        chunk_tokens=(10,),
    )


def closed_loop(c: int, waves: int, e2e_ms: float, gap_ms: float) -> list[RequestSample]:
    """C slots, each sending `waves` requests back to back, `gap_ms` between a request's end and the next send."""
    out = []
    for _slot in range(c):
        t = 0.0
        for _ in range(waves):
            out.append(sample(t, t + gap_ms, t + gap_ms + e2e_ms))
            t += gap_ms + e2e_ms
    return out


def ev(**kw: object) -> LevelEvidence:
    base: dict[str, object] = {
        "concurrency": 8,
        "requests": 80,
        "window_s": 10.0,
        "idle_share": 0.0,
        "send_share": 0.0,
        "probes": (IDLE,),
    }
    base.update(kw)
    return LevelEvidence(**base)  # type: ignore[arg-type]


def test_a_client_with_headroom_is_not_flagged() -> None:
    assert judge(ev()).reasons == ()
    assert not judge(ev()).client_limited


def test_the_false_alarm_of_the_issue_one_slow_send_of_ten_is_not_evidence() -> None:
    # `bench --url` at C=1: 10 requests of ~2 s, one sent 17 ms late, client at 1 % CPU.
    samples = closed_loop(1, 10, 2000.0, 0.05)
    samples[3] = sample(samples[3].scheduled_ns / MS, samples[3].scheduled_ns / MS + 17.2, samples[3].end_ns / MS)
    share = send_share(samples)
    assert share < 0.001
    assert judge(ev(concurrency=1, requests=10, send_share=share)).reasons == ()


def test_send_delay_that_holds_slots_idle_is_flagged_with_its_share() -> None:
    samples = closed_loop(4, 10, 200.0, 10.0)  # 10 ms of every 210 ms spent before sending
    share = send_share(samples)
    assert share == pytest.approx(10 / 210, rel=1e-6)
    reasons = judge(ev(send_share=share)).reasons
    assert any("send delay 4.8%" in r for r in reasons), reasons


def test_idle_share_inside_the_window() -> None:
    samples = closed_loop(4, 10, 90.0, 10.0)
    window = Window(100 * MS, 900 * MS)
    assert idle_share(samples, 4, window) == pytest.approx(0.1, abs=1e-9)
    assert idle_share(samples, 4, Window(0, 1000 * MS, steady=False)) is None
    assert idle_share(samples, 4, None) is None
    reasons = judge(ev(concurrency=4, idle_share=0.1)).reasons
    assert any("3.60 of 4 in flight on average, 10.0% of slot time idle" in r for r in reasons), reasons
    assert judge(ev(concurrency=4, idle_share=0.005)).reasons == ()


def test_probe_lag_counts_against_the_window_it_can_shift() -> None:
    lagging = Load(cpu_share=0.5, lag_p90_ms=30.0, lag_p99_ms=60.0)
    assert judge(ev(probes=(lagging,), window_s=10.0)).reasons == ()  # 30 ms / 10 s = 0.3 %
    reasons = judge(ev(probes=(IDLE, lagging), window_s=2.0)).reasons  # 1.5 %
    assert any("probe event-loop lag p90 30.0 ms" in r for r in reasons), reasons


def test_a_saturated_probe_is_flagged_only_when_the_server_waited() -> None:
    hot = Load(cpu_share=0.97, lag_p90_ms=0.5, lag_p99_ms=2.0)
    assert judge(ev(probes=(hot,))).reasons == ()  # no server view: no evidence the server waited
    assert judge(ev(probes=(hot,), server_running_max=8.0)).reasons == ()  # the server ran all C
    assert judge(ev(probes=(hot,), concurrency=64, server_running_max=48.0, server_cap=48)).reasons == ()
    reasons = judge(ev(probes=(hot,), server_running_max=5.0)).reasons
    assert any("probe CPU 97%" in r and "at most 5 of 8" in r for r in reasons), reasons


def test_a_lagging_ui_is_a_note_not_a_flag_unless_it_carries_the_link() -> None:
    ui = Load(cpu_share=0.6, lag_p90_ms=120.0, lag_p99_ms=300.0)
    apart = judge(ev(parent=ui, link_in_parent=False, window_s=5.0))
    assert apart.reasons == ()
    assert apart.notes and apart.notes[0].startswith("the UI lagged (event-loop lag p99 300 ms), not the measurement")
    carrying = judge(ev(parent=ui, link_in_parent=True, window_s=5.0))  # 120 ms / 5 s = 2.4 %
    assert any("SSH forward's process lagged" in r for r in carrying.reasons), carrying
    mild = Load(cpu_share=0.6, lag_p90_ms=5.0, lag_p99_ms=40.0)
    within = judge(ev(parent=mild, link_in_parent=True, window_s=10.0))
    assert within.reasons == () and "within bounds" in within.notes[0]
    quiet = judge(ev(parent=Load(0.1, 1.0, 3.0), link_in_parent=True))
    assert quiet == judge(ev())


def test_evidence_gathers_the_level() -> None:
    samples = closed_loop(2, 5, 95.0, 5.0)
    window = Window(100 * MS, 400 * MS)
    e = evidence(samples, 2, window, [IDLE], server_running_max=2.0, server_cap=48)
    assert e.requests == 10 and e.window_s == pytest.approx(0.3)
    assert e.idle_share == pytest.approx(0.05, abs=1e-9)
    assert e.send_share == pytest.approx(0.05, rel=1e-6)
    assert evidence([], 2, None, []).window_s == 0.0
    assert judge(evidence([], 2, None, [])).reasons == ()
