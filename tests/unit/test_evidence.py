"""The engine-agnostic evidence, through a whole replay: shapes of crashes, stops and serving that no fixture
shows in exactly this form, and every fixture again behind each kind of wrapper a log picks up on its way
to a user (docker compose, kubectl --timestamps, Ray, a markdown quote, indentation, CRLF, colour codes
that lost their ESC)."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from specdash.core.timeline import replay_text

LOGS = Path(__file__).parent.parent / "fixtures" / "logs"
FIXTURES = sorted(
    {*tomllib.loads((LOGS / "expected.toml").read_text()), *json.loads((LOGS / "labels-batch2.json").read_text())}
    - {"_about"}
)

SGL = "[2026-05-01 10:00:00 TP0]"
VLLM = "(EngineCore_DP0 pid=7) ERROR 05-01 10:00:00 [core.py:1]"
SERVING = f"{SGL} Decode batch, #running-req: 6, #token: 424, token usage: 0.04, cuda graph: True, #queue-req: 0,"

CASES: list[tuple[str, list[str], str, str]] = [
    # (id, lines, outcome, the deciding line's start)
    (
        "headerless-unindented-traceback",
        ['File "/x/sglang/srt/scheduler.py", line 9, in run', "init()", "ValueError: bad draft config"],
        "crashed",
        "ValueError",
    ),
    ("lone-exception-line", [SERVING, "torch.OutOfMemoryError: CUDA out of memory."], "crashed", "torch.Out"),
    (
        "enginecore-hit-an-exception-cut",
        [f"{VLLM} EngineCore hit an exception: Traceback (most recent call last):", f'{VLLM}   File "/a.py", line 1'],
        "crashed",
        "(EngineCore_DP0 pid=7) ERROR 05-01 10:00:00 [core.py:1] EngineCore hit",
    ),
    ("spec-decode-fatal-error", [f"{VLLM} EngineCore encountered a fatal error."], "crashed", "(EngineCore_DP0"),
    (
        "old-worker-prefix",
        [
            "(VllmWorker rank=2 pid=55) ERROR 10-01 10:00:00 [multiproc_worker_utils.py:1] Traceback (most recent "
            "call last):",
            '(VllmWorker rank=2 pid=55) ERROR 10-01 10:00:00 [multiproc_worker_utils.py:1]   File "/w.py", line 3',
            "(VllmWorker rank=2 pid=55) ERROR 10-01 10:00:00 [multiproc_worker_utils.py:1] RuntimeError: NCCL error",
        ],
        "crashed",
        "(VllmWorker rank=2 pid=55) ERROR 10-01 10:00:00 [multiproc_worker_utils.py:1] RuntimeError",
    ),
    (
        "workerproc-died",
        ["(Worker_TP1 pid=9) INFO 05-01 10:00:00 [gpu.py:1] x", "WorkerProc pid 9 died unexpectedly"],
        "crashed",
        "WorkerProc",
    ),
    (
        "native-assert-abort",
        [SERVING, "python: /src/csrc/cache_kernels.cpp:40: void f(): Assertion `ok' failed.", "Aborted (core dumped)"],
        "crashed",
        "python: /src/csrc/cache_kernels.cpp:40",
    ),
    ("segfault", [SERVING, "Segmentation fault (core dumped)"], "crashed", "Segmentation fault"),
    ("killed", [SERVING, "Killed"], "crashed", "Killed"),
    (
        "module-not-found-in-a-container",
        [
            "sglang-1  | Traceback (most recent call last):",
            'sglang-1  |   File "<frozen runpy>", line 198, in _run_module_as_main',
            "sglang-1  | ModuleNotFoundError: No module named 'sglang'",
        ],
        "crashed",
        "ModuleNotFoundError",
    ),
    (
        "pydantic-validation-error",
        [
            "(APIServer pid=1) INFO 11-29 10:00:00 [utils.py:1] non-default args: {'speculative_config': {}}",
            "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig",
            "  Value error, num_speculative_tokens must be > 0 [type=value_error, input_value=ArgsKwargs(()), ...]",
        ],
        "crashed",
        "pydantic_core._pydantic_core.ValidationError",
    ),
    (
        "hf-validation-error",
        [
            "(APIServer pid=1) INFO 11-29 10:00:00 [utils.py:1] non-default args: {'model': '/no/such'}",
            "huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name'...: '/no/such'.",
        ],
        "crashed",
        "huggingface_hub.errors.HFValidationError",
    ),
    (
        "exception-then-serving-again",
        [SERVING, "ValueError: prompt too long", '"POST /v1/completions HTTP/1.1" 400 Bad Request', SERVING],
        "serving",
        SGL,
    ),
    (
        "sigterm-then-enginedead-traceback",
        [
            "(APIServer pid=1) INFO 05-26 19:19:50 [loggers.py:1] Engine 000: Avg prompt throughput: 1.0 tokens/s, "
            "Avg generation throughput: 9.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs",
            "(EngineCore pid=3) INFO 05-26 19:19:56 [core.py:1] [shutdown] EngineCore: trigger received signal=SIGTERM",
            "(APIServer pid=1) ERROR 05-26 19:19:56 [async_llm.py:1] Traceback (most recent call last):",
            "(APIServer pid=1) ERROR 05-26 19:19:56 [async_llm.py:1] vllm.v1.engine.exceptions.EngineDeadError: x",
        ],
        "stopped",
        "(EngineCore pid=3) INFO 05-26 19:19:56 [core.py:1] [shutdown]",
    ),
    (
        "sglang-sigterm",
        [SERVING, f"{SGL} SIGTERM received. signum=None frame=None. Draining requests and shutting down...", SERVING],
        "stopped",
        f"{SGL} SIGTERM",
    ),
    ("gracefully-exiting", [SERVING, f"{SGL} Gracefully exiting... Remaining requests: 0"], "stopped", SGL),
    (
        "ctrl-c",
        [SERVING, "^CTraceback (most recent call last):", '  File "/x.py", line 1, in <module>', "KeyboardInterrupt"],
        "stopped",
        "^CTraceback",
    ),
    (
        "uvicorn-shutdown",
        [SERVING, "INFO:     Shutting down", "INFO:     Finished server process [177326]"],
        "stopped",
        "INFO:     Shutting down",
    ),
    (
        "crash-then-teardown",
        [SERVING, f"{SGL} Scheduler hit an exception: Traceback (most recent call last):", "INFO:     Shutting down"],
        "crashed",
        f"{SGL} Scheduler hit an exception",
    ),
    ("exception-then-teardown", [SERVING, "RuntimeError: CUDA error", "INFO:     Shutting down"], "crashed", "Runtime"),
    (
        "serving-from-access-lines-only",
        ['INFO:     127.0.0.1:5 - "POST /v1/chat/completions HTTP/1.1" 200 OK'],
        "serving",
        "INFO:     127.0.0.1:5",
    ),
]


@pytest.mark.parametrize(("lines", "outcome", "decided"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_generic_evidence_decides(lines: list[str], outcome: str, decided: str) -> None:
    timeline = replay_text("\n".join(lines) + "\n")
    assert timeline.outcome.value == outcome, timeline.as_dict()
    assert timeline.decision is not None and timeline.decision.line.startswith(decided), timeline.decision
    assert timeline.decision.line_no is not None
    assert lines[timeline.decision.line_no - 1].endswith(timeline.decision.line.removeprefix("^C")[-20:])


WRAPPERS: dict[str, Callable[[str], str]] = {
    "docker": lambda line: f"vllm-server-1  | {line}",
    "kubectl": lambda line: f"2026-12-01T10:00:00.123456789Z {line}",
    "ray": lambda line: f"(ServeReplica pid=4242) {line}",
    "markdown": lambda line: f"> {line}",
    "indented": lambda line: f"    {line}",
    "crlf": lambda line: f"{line}\r",
    "ansi-without-esc": lambda line: f"[0;36m{line}[0m" if line else line,
}


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
@pytest.mark.parametrize("name", FIXTURES)
def test_every_fixture_reads_the_same_behind_a_wrapper(name: str, wrapper: str) -> None:
    text = (LOGS / name).read_text(encoding="utf-8")
    plain = replay_text(text)
    wrapped = replay_text("\n".join(WRAPPERS[wrapper](line) for line in text.split("\n")))
    assert (wrapped.engine, wrapped.outcome, wrapped.highest_phase) == (
        plain.engine,
        plain.outcome,
        plain.highest_phase,
    )
    assert [(s.phase, s.progress) for s in wrapped.spans] == [(s.phase, s.progress) for s in plain.spans]
    assert (wrapped.decision and wrapped.decision.line_no) == (plain.decision and plain.decision.line_no)
