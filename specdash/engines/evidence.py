"""Engine-agnostic evidence: what a line means whichever engine (or engine version) printed it.

The engine modules know their exact wording; this module knows the shapes that every Python inference server
shares, so that a log from an engine version nobody here has seen is still read right:

- **Tracebacks** by their grammar: the `Traceback (most recent call last):` header, `File "...", line N, in f`
  frames (indented or not, so a paste that lost its header or its indentation still reads as a traceback),
  and the exception line that ends one (`pkg.mod.SomeError: message`, a bare `AssertionError`,
  `pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig`,
  `huggingface_hub.errors.HFValidationError: ...`, `ModuleNotFoundError: ...`).
- **Death lines**: a process of the server dying, in the wording of every vLLM generation and of SGLang
  (`... hit an exception`, `... encountered a fatal error`, `... failed to start`, `Worker proc X died
  unexpectedly`, `initialization failed`), native aborts (`python: x.cpp:40: f(): Assertion `c' failed.`,
  `Segmentation fault`, `Aborted (core dumped)`, `Fatal Python error`), and the shell's `Killed`.
- **Serving**: scheduler batch lines, periodic throughput and spec-decode stats lines, and HTTP access lines
  for inference endpoints (a 5xx answer proves the server was serving, not that it still is).
- **Shutdown**: a SIGTERM/SIGINT received (any wording that names the signal, a `^C` echo, a
  `KeyboardInterrupt`), and teardown wording (`Shutting down`, `[shutdown]`, `Finished server process`,
  `Gracefully exiting`, uvicorn's application shutdown).
- **Progress bars**: tqdm bars of loading and graph capture by their label and `n/N` part.

Each function checks a cheap substring before a regular expression: this runs for every line.
"""

from __future__ import annotations

import re

from specdash.engines.observations import (
    CrashKind,
    CrashSignal,
    LogLine,
    Observation,
    PhaseHint,
    ProgressHint,
    ServingHint,
    StopHint,
)
from specdash.engines.text import TRACEBACK, bar_counts, bar_label, exception_line, trim_traceback
from specdash.phases import Phase, Progress

# `File "/x/y.py", line 12, in f` (also `File "<frozen runpy>", line 198, in _run_module_as_main`).
_FRAME = re.compile(r'\s*File "[^"]+", line \d+(?:, in \S+)?')

# (pattern, weight): lines printed when a process of the server is dying. Weight orders the reason.
_DEATH = (
    (re.compile(r"\bAssertion\b.*\bfailed\b"), 3),  # a C/C++ assert(): its own line is the reason
    (re.compile(r"Fatal Python error|Segmentation fault|\bSIGSEGV\b|core dumped|terminate called after"), 3),
    (re.compile(r"hit an exception|encountered a fatal error|failed to start"), 2),
    (re.compile(r"[Ii]nitiali[sz]ation failed|[Ss]tartup failed|crashed with exit code"), 2),
    (re.compile(r"\bis dead\b|\bdied\b|\bAborted\b"), 1),
)

_FATAL = re.compile(r"[Aa]ddress already in use")

_GONE = re.compile(r"(?:died|exited) unexpectedly")
"""A process of the server is gone (`Worker proc VllmWorker-0 died unexpectedly`, `Engine core proc EngineCore_DP0
died unexpectedly`). Unlike `... hit an exception`, no traceback of its own follows: it explains the crash at
once, by the exception just before it when there is one (the process that raised, then died), else by itself
(a process killed from outside: the traceback that follows is the survivors' reaction, `RuntimeError:
cancelled`)."""

# `"POST /v1/chat/completions HTTP/1.1" 200` (uvicorn), also without quotes (other access loggers).
_ACCESS = re.compile(r'"?(?:GET|POST|PUT|PATCH) (?P<path>/\S*) HTTP/[\d.]+"? (?P<status>\d{3})\b')
_INFERENCE_PATH = re.compile(
    r"/(?:v\d+/)?(?:completions|chat/completions|embeddings|responses|messages|generate|score|rerank|classify"
    r"|pooling|audio/)"
)
_SERVING_WORDS = ("Prefill batch", "Decode batch", "Avg prompt throughput", "Avg generation throughput")
_SPEC_WORDS = ("SpecDecoding metrics", "Speculative metrics")

# A signal named as received: `[shutdown] EngineCore: trigger received signal=SIGINT`, `SIGTERM received`,
# `Received SIGTERM`, `caught SIGINT`, `signal 15 received`. SIGQUIT is not a stop (SGLang's child-failure call).
_SIGNAL = re.compile(r"\b(SIGTERM|SIGINT|signal (?:15|2)\b)")
_SIGNAL_CONTEXT = ("eceiv", "rigger", "aught", "ignal=", "andl", "Got", "got ")
_TEARDOWN = (
    "Shutting down",
    "shutting down",
    "[shutdown]",
    "shutdown triggered",
    "Finished server process",
    "Gracefully exiting",
    "Gracefully stopping",
    "Waiting for application shutdown",
    "Application shutdown complete",
)


# Whether a line can mean anything here (most lines cannot): every branch below needs one of these words.
# Plain substring tests: for a set of words this size they are several times faster than one alternation.
_ANCHORS = (
    "%",
    "batch",
    "throughput",
    "metrics",
    " HTTP/",
    "dead",
    "Traceback",
    'File "',
    "Error",
    "Exception",
    "Interrupt",
    "Exit",
    "Failed",
    "Fault",
    "fault",
    "ssert",
    "atal",
    "SIG",
    "signal ",
    "dump",
    "termin",
    "fail",
    "died",
    "xited",
    "bort",
    "in use",
    "hut",
    "inished",
    "racefully",
    "shutdown",
    "startup complete",
    "Uvicorn",
)
_DEATH_WORDS = ("ssert", "atal", "fault", "SIG", "dump", "termin", "xception", "fail", "died", "dead", "xited", "bort")


_HEAD = 400


def _phase_of_bar(label: str) -> Phase | None:
    low = label.lower()
    if "shard" in low or "checkpoint" in low or "weight" in low:
        return Phase.LOADING_WEIGHTS
    if "captur" in low:
        return Phase.CAPTURING_GRAPHS
    return None


def generic_observations(line: LogLine) -> list[Observation]:
    """The engine-agnostic evidence in one cleaned line (see the module docstring)."""
    t = line.text
    if len(t) < 12:
        if t.strip() == "Killed":  # the shell reporting SIGKILL (often the OOM killer) of what it ran
            return [CrashSignal(CrashKind.MARKER, "Killed", 2)]
        if len(t) < 5:
            return []
    out: list[Observation] = []
    if line.raw.startswith("^C"):
        out.append(StopHint("SIGINT"))
    else:
        for word in _ANCHORS:
            if word in t:
                break
        else:
            return out
    if "%" in t:
        label = bar_label(t)
        counts = None if label is None else bar_counts(t)
        phase = None if label is None else _phase_of_bar(label)
        if phase is not None and counts is not None:
            return [
                ProgressHint(
                    phase, Progress(counts[0], counts[1], "shards" if phase is Phase.LOADING_WEIGHTS else "steps")
                )
            ]
    if "batch" in t or "throughput" in t:
        if any(word in t for word in _SERVING_WORDS):
            return [ServingHint()]
    if "metrics" in t and any(word in t for word in _SPEC_WORDS):
        return [ServingHint()]
    if " HTTP/" in t:
        m = _ACCESS.search(t)
        if m is not None:
            if _INFERENCE_PATH.match(m.group("path")):
                return [ServingHint(alive=not m.group("status").startswith("5"))]
            return out
    if "engine dead" in t:
        out.append(ServingHint(alive=False))
    # What kind of line this is shows in its head: a long message (a 2,000-character repr) is not scanned.
    head = t[:_HEAD] if len(t) > _HEAD else t
    cut = head.find(TRACEBACK)
    if cut >= 0:
        # `Scheduler hit an exception: Traceback (...)`: what precedes the header may be a death line.
        out.append(CrashSignal(CrashKind.TRACEBACK, trim_traceback(t)))
        head = head[:cut]
        if not head.strip():
            return out
    elif 'File "' in head and _FRAME.match(t):
        out.append(CrashSignal(CrashKind.FRAME, t.strip()))
        return out
    elif exception_line(t):
        if "KeyboardInterrupt" in t:
            return [StopHint("SIGINT")]
        out.append(CrashSignal(CrashKind.EXCEPTION, t.strip()))
    died = False
    if "unexpectedly" in head and _GONE.search(head):
        out.append(CrashSignal(CrashKind.FATAL, trim_traceback(t), 2))
        died = True
    elif any(word in head for word in _DEATH_WORDS):
        for pattern, weight in _DEATH:
            if pattern.search(head):
                out.append(CrashSignal(CrashKind.MARKER, trim_traceback(t), weight))
                died = True
                break
    if "in use" in head and _FATAL.search(head):
        out.append(CrashSignal(CrashKind.FATAL, t.strip(), 4))
        died = True
    if died:
        return out
    if "SIG" in head or "signal " in head:
        m = _SIGNAL.search(head)
        if m is not None and any(word in head for word in _SIGNAL_CONTEXT):
            sig = m.group(1)
            out.append(StopHint("SIGINT" if sig in ("SIGINT", "signal 2") else "SIGTERM"))
            return out
    if "hut" in head or "inished" in head or "racefully" in head or "shutdown" in head:
        if any(word in head for word in _TEARDOWN):
            out.append(StopHint())
            return out
    if "Application startup complete" in head or "Uvicorn running on" in head:
        out.append(PhaseHint(Phase.WARMING_UP))  # uvicorn: serving HTTP; the engine says whether that is ready
    return out
