"""The startup advisor on real and synthetic logs: it runs on every fixture log with timestamps, gives its
evidence and predicted saving, says what a flag changes, and refuses absurd logs with one message."""

from __future__ import annotations

from pathlib import Path

import pytest

from specdash.core.advisor import (
    MAX_GRAPH_BS,
    Advice,
    AdvisorError,
    Report,
    advise,
    measured_saving,
    report_text,
)
from specdash.engines.registry import make_rules

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
SGLANG = LOGS / "synthetic" / "sglang_v056_eagle3_tp2_ready.log"
ALL = sorted(LOGS.rglob("*.log"))


def lines(path: Path) -> list[str]:
    return path.read_text(errors="replace").splitlines()


def timed(path: Path) -> bool:
    rules = [make_rules(e) for e in ("sglang", "vllm")]
    return any(r.clean(line).time is not None for line in lines(path) for r in rules)


@pytest.mark.parametrize("path", [p for p in ALL if timed(p)], ids=lambda p: p.name)
def test_it_runs_on_every_fixture_log_with_timestamps(path: Path) -> None:
    try:
        report = advise(lines(path), 64)
    except AdvisorError as exc:
        # Only a log no engine claims may be refused; then the message says so.
        assert "not a server log specdash knows" in str(exc), exc
        return
    text = report_text(report)
    assert text[0].startswith("start: ")
    for advice in report.advice:
        assert advice.saving_s >= 1.0 and advice.evidence and advice.caveat


def test_graph_sizes_beyond_the_concurrency_used_are_named_with_evidence_saving_and_the_throughput_note() -> None:
    report = advise(lines(SGLANG), 4)
    (graphs,) = [a for a in report.advice if a.flag.startswith("--cuda-graph-max-bs")]
    assert graphs.flag == "--cuda-graph-max-bs 4"
    assert graphs.evidence.startswith("line 27: Capturing batches (bs=48")
    # 10 default sizes up to 48, 3 kept (1, 2, 4): 70 % of the 10 s + 48 s of target and draft graph capture.
    assert graphs.saving_s == pytest.approx(58.0 * 0.7)
    assert "throughput at concurrency above 4 drops" in graphs.caveat


def test_nothing_is_advised_for_graphs_the_sweeps_use() -> None:
    assert not [a for a in advise(lines(SGLANG), 64).advice if a.flag.startswith("--cuda-graph")]


def test_a_compile_without_a_cache_hit_is_advised_with_its_line() -> None:
    log = LOGS / "vllm_speculators-pr166_eagle3_compile_kvcache_capture_2025-10.log"
    (compile_,) = [a for a in advise(lines(log), 64).advice if "compile cache" in a.title]
    assert compile_.saving_s == pytest.approx(6.25 * 0.9)
    assert compile_.evidence.endswith("torch.compile takes 6.25 s in total")


def test_measured_against_predicted_after_the_flag_is_applied() -> None:
    before = advise(lines(SGLANG), 4)
    graphs = before.advice[0]
    # The next start, with --cuda-graph-max-bs 4: target graphs 3 s instead of 10 s, draft graphs 14 s not 48 s.
    phases = tuple(
        (p, {"capturing CUDA graphs": 3.0, "capturing draft graphs": 14.0}.get(p, s)) for p, s in before.phases
    )
    after = Report(before.engine, 54.0, phases)
    assert measured_saving(before, after, graphs) == pytest.approx(41.0)
    compile_ = Advice("keep the cache", "VLLM_CACHE_ROOT on a persistent disk", "compiling", 5.6, "line 6: x")
    assert measured_saving(Report("vllm", 9, (), compile_s=6.25), Report("vllm", 4, (), compile_s=0.4), compile_) == (
        pytest.approx(5.85)
    )


def test_backwards_timestamps_are_refused_with_the_line() -> None:
    log = lines(SGLANG)
    log.insert(30, "[2025-12-20 09:00:00 TP0] Load weight end. type=X")
    with pytest.raises(AdvisorError, match=r"^line 31: its timestamp is \d+ s before an earlier line's"):
        advise(log, 64)


def test_timestamps_years_apart_are_refused() -> None:
    log = lines(SGLANG)
    log.append("[2028-12-20 10:00:00 TP0] Decode batch, #running-req: 1")
    with pytest.raises(AdvisorError, match=r"days after the first line: one start does not take that long"):
        advise(log, 64)


def test_a_million_graph_sizes_are_refused() -> None:
    log = lines(SGLANG)
    log.insert(26, f"Capturing batches (bs={10**6} avail_mem=14.50 GB):   0%|          | 0/8")
    with pytest.raises(AdvisorError, match=f"line 27: a CUDA graph for batch size {10**6} is not a real capture"):
        advise(log, 64)
    assert MAX_GRAPH_BS < 10**6


def test_a_log_without_timestamps_is_refused() -> None:
    with pytest.raises(AdvisorError, match="no line of this log has a timestamp"):
        advise(["Load weight end. type=X", "The server is fired up and ready to roll!"], 64, "sglang")


def test_the_command_refuses_an_absurd_log_with_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from specdash.cli import main

    log = lines(SGLANG)
    log.insert(30, "[2025-12-20 09:00:00 TP0] Load weight end. type=X")
    path = tmp_path / "server.log"
    path.write_text("\n".join(log))
    assert main(["advise", "--log", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"specdash: error: advise --log {path}: line 31: its timestamp is ")
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_the_command_prints_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from specdash.cli import main

    assert main(["advise", "--log", str(SGLANG), "--max-concurrency", "4", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["engine"] == "sglang" and data["total_s"] == 95.0
    assert data["advice"][0]["flag"] == "--cuda-graph-max-bs 4"
    assert data["applied_since_previous_start"] == []


RESTARTS = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_cpu_restarts"


def test_predicted_against_measured_on_two_real_vllm_cpu_restarts() -> None:
    """Two real starts of the vLLM CPU engine on one cache (fixtures/vllm_cpu_restarts/README.md). Its AOT compile
    prints no total: the compiling phase times it. The second start found the cache and failed to load it, and
    the advisor says so with vLLM's reason rather than advising the cache it already has."""
    cold = advise(lines(RESTARTS / "cold_compile_cache.log"), 64)
    (keep,) = cold.advice
    assert keep.title.startswith("keep the torch.compile cache") and keep.phase == "compiling"
    assert "saved AOT compiled function" in keep.evidence
    assert cold.compile_s == pytest.approx(57.0)
    assert keep.saving_s == pytest.approx(57.0 * 0.9)
    warm = advise(lines(RESTARTS / "warm_compile_cache.log"), 64)
    (failed,) = warm.advice
    assert failed.title == "the torch.compile cache is kept but failed to load, so it compiled again"
    assert "reason: 'function' object has no attribute 'finalize_loading'" in failed.evidence
    # Predicted 51 s from the cold start; the warm start saved 18 s, because its cache did not load.
    assert measured_saving(cold, warm, keep) == pytest.approx(18.0)


def test_predicted_against_measured_on_two_real_h100_restarts() -> None:
    """vLLM 0.24.0 on the H100 (fixtures/logs/vllm_h100_real): n-gram cold, then restarted on the warm cache."""
    real = LOGS / "vllm_h100_real"
    cold = advise(lines(real / "vllm_h100_0240_ngram_sleep_wake_sigterm.log"), 64)
    (keep,) = [a for a in cold.advice if a.phase == "compiling"]
    assert keep.saving_s == pytest.approx(cold.compile_s * 0.9) and cold.compile_s >= 10
    warm = advise(lines(real / "vllm_h100_0240_ngram_restart_warm_compile_cache_sigterm.log"), 64)
    assert not [a for a in warm.advice if a.phase == "compiling"]  # the cache loaded: nothing left to advise
    assert measured_saving(cold, warm, keep) == pytest.approx(keep.saving_s, rel=0.15)
