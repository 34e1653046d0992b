"""Line cleaning and small parsers that both engines need (making untrusted text safe for the terminal is
`specdash.safetext`).

Everything here is called once per log line, so each function checks a cheap substring before it runs a
regular expression: most lines have no colour, no container prefix and no progress bar.
"""

from __future__ import annotations

import calendar
import re

from specdash.safetext import escape_controls

# Real escape sequences (CSI and OSC), the literal caret form `^[[0;36m` that pasted logs carry (vllm#33756:
# the terminal's rendering of ESC was copied as two characters), and SGR codes whose ESC was lost in a paste
# (`[0;36m(APIServer pid=31)[0;0m`): only digits and semicolons before the `m`, so `[TP0]` is never touched.
_ANSI = re.compile(
    r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|\^\[\[[0-9;]*[A-Za-z]|\[[0-9;]{1,12}m"
)
_BARE_SGR = re.compile(r"\[[0-9;]{1,12}m")

# Wrappers that other programs put around a server's own line; stripped in any order, each once:
# - kubectl logs --timestamps: an RFC 3339 time, `2026-03-22T13:53:37.123456789Z ` (or `+00:00`);
_RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\s+")
# - docker compose v1/v2: `llm0-1  | `, `sglang_1  | `, `vllm  | ` (sglang#8186): one word, spaces, a bar;
_CONTAINER = re.compile(r"[A-Za-z0-9][\w.-]*\s+\|(?: |$)")
# - a process tag: Ray's `(SGLangEngine pid=41820) `, `(pid=7, ip=10.0.0.2) `, and vLLM's own
#   `(EngineCore_DP0 pid=2039425) `, `(VllmWorker rank=2 pid=11) `, `(VllmWorker TP1 pid=9) ` (the same
#   shape); a paste may have lost the opening parenthesis (vllm#25125);
_PROC_TAG = re.compile(
    r"\(?(?P<tag>[A-Za-z_][\w.:-]*(?: (?:[\w.-]+=[\w.:-]+|[A-Z]+\d+))* )?pid=\d+(?:, ip=[\w.:-]+)?\) ?"
)
# - a markdown quote (`> `, nested too) and indentation (a paste indented as a block).
_QUOTE = re.compile(r"(?:>[ \t]?)+")

# `RuntimeError: ...`, `torch.OutOfMemoryError: ...`, `pydantic_core._pydantic_core.ValidationError: 1
# validation error for SpeculativeConfig`, `torch._dynamo.exc.BackendCompilerFailed: ...`, a bare
# `AssertionError`, `KeyboardInterrupt`. Warnings are deliberately left out: `FutureWarning: ...` pairs are
# routine noise (engines.md 5.5).
_EXCEPTION = re.compile(
    r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Interrupt|Exit|Failed|Fault)(?::\s.*|:)?",
)
_EXCEPTION_WORDS = ("Error", "Exception", "Interrupt", "Exit", "Failed", "Fault")

# tqdm's right part: `| 15/16 [00:06<00:00, ...]` (shard bars, `Capturing batches`, vLLM graph bars).
_BAR_COUNT = re.compile(r"\|\s*(\d+)/(\d+)\s*(?:\[|$)")
# tqdm's left part: `LABEL:  50%|` or vLLM's `LABEL:  50% Completed | ` (the label may be empty).
_BAR_HEAD = re.compile(r"(?P<label>[^%|]*?)[: ]*(?P<pct>\d{1,3})%(?:\||\s+Completed\s*\|)")

TRACEBACK = "Traceback (most recent call last)"
"""The first line of every Python traceback."""


# First characters of a line that may carry a wrapper: indentation, a quote, a `^C`, a process tag, a time.
_WRAPPER_STARTS = frozenset(" \t>^(0123456789")


def unwrap(raw: str) -> tuple[str, str]:
    """`unwrap_tagged` without the tagged line."""
    text, tag, _ = unwrap_tagged(raw)
    return text, tag


def unwrap_tagged(raw: str) -> tuple[str, str, str]:
    """A server line out of its wrappers (other control characters escaped): colour codes, kubectl time,
    docker-compose name, Ray or vLLM process tag, markdown quote, indentation, trailing CR and spaces, and a
    `^C` the terminal echoed into it.

    Returns `(text, tag, tagged)`: the line the server itself printed, the process tag without `pid=`
    (`EngineCore_DP0`, `VllmWorker rank=2`, `SGLangEngine`; empty when there was none), and the line with its
    process tag (and a `^C` echo) and its own indentation, as a reader would quote it.
    """
    line = escape_controls(strip_ansi(raw).rstrip())  # what colour stripping left (BEL, a lone ESC, C1) is shown
    if line[:1] not in _WRAPPER_STARTS and "|" not in line[:80] and "pid=" not in line[:120]:
        return line, "", line  # the common case: a server's own line, nothing around it
    tag = ""
    tag_text = ""
    echo = ""
    shown = line  # what a reader sees: wrappers off, but the line's own indentation kept (traceback frames)
    for _ in range(6):  # each wrapper at most once: bounded, whatever the input
        before = line
        line = line.lstrip()
        if line.startswith("^C"):
            line = shown = line[2:]
            echo = "^C"
        if line[:1].isdigit() and line[10:11] == "T":
            m = _RFC3339.match(line)
            if m:
                line = shown = line[m.end() :]
        if "|" in line[:80] and not line.startswith("|"):
            m = _CONTAINER.match(line)
            if m:
                line = shown = line[m.end() :]
        if "pid=" in line[:120]:
            m = _PROC_TAG.match(line)
            if m:  # Ray's tag around vLLM's own: the innermost names the process that printed the line
                tag, tag_text, line = (m.group("tag") or "").strip(), m.group(0), line[m.end() :]
                shown = line
        if line.startswith(">"):
            m = _QUOTE.match(line)
            if m:
                line = shown = line[m.end() :]
        if line == before:
            break
    return line, tag, echo + tag_text + shown


def strip_ansi(line: str) -> str:
    """Remove terminal colour codes: real, pasted as `^[[...m`, or pasted without their ESC (`[0;36m`)."""
    if "\x1b" in line or "^[" in line:
        return _ANSI.sub("", line)
    if "m" in line and "[" in line:
        return _BARE_SGR.sub("", line)
    return line


def pre_clean(raw: str) -> str:
    """The server's own line without any wrapper (see `unwrap`)."""
    return unwrap(raw)[0]


def exception_line(text: str) -> bool:
    """True for a `SomeError: message` line, the last line of a traceback (indented or not: pastes indent)."""
    if not text or not any(word in text for word in _EXCEPTION_WORDS):
        return False
    return _EXCEPTION.fullmatch(text.strip()) is not None


def bar_counts(text: str) -> tuple[int, int] | None:
    """`(n, N)` from a tqdm bar's `| n/N [...]` part, or None."""
    if "/" not in text:
        return None
    m = _BAR_COUNT.search(text)
    if m is None:
        return None
    done, total = int(m.group(1)), int(m.group(2))
    return (done, total) if 0 <= done <= total else None


def bar_label(text: str) -> str | None:
    """The label of a tqdm bar (`Loading safetensors checkpoint shards`, `Capturing batches`), or None when the
    line is no bar. A parenthesised part that changes per redraw (`(bs=512 avail_mem=...)`) is dropped."""
    if "%" not in text:
        return None
    m = _BAR_HEAD.search(text)
    if m is None:
        return None
    label = m.group("label").strip()
    cut = label.find(" (")
    return (label[:cut] if cut > 0 else label).rstrip(": ")


def epoch_seconds(year: int, month: int, day: int, hour: int, minute: int, second: int, frac: str = "") -> float | None:
    """Seconds since 1970 for a naive log timestamp read as UTC (only differences matter to us).

    None for an impossible date (month 13 in a garbled line): a bad timestamp must not cost the line.
    """
    try:
        value = float(calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0)))
    except (ValueError, OverflowError):
        return None
    if frac:
        value += int(frac) / 10 ** len(frac)
    return value


def trim_traceback(text: str) -> str:
    """`Scheduler hit an exception: Traceback (most recent...):` -> `Scheduler hit an exception`."""
    cut = text.find(TRACEBACK)
    if cut <= 0:
        return text.strip()
    return text[:cut].rstrip(" :").strip()
