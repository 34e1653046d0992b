"""Every bound specdash puts on what it reads and accepts, in one place (README "Limits").

A server, a host or a file can send more than anyone expects; each buffer that grows with what arrives
has a bound here, and what goes over it fails that one request, poll or file with a message that names
the limit, never the process. Numeric options are checked against these ranges at parse time (exit 2).

| what | bound |
|---|---|
| config file | `MAX_CONFIG_BYTES`, regular files only |
| a mode's `extends` chain | `MAX_EXTENDS_DEPTH` modes |
| prompts file | `MAX_PROMPTS_BYTES`, regular files only |
| a known_hosts file | `MAX_KNOWN_HOSTS_BYTES`, regular files only |
| a control-plane body (`/server_info`, `/metrics`, `/v1/models`, `/version`) | `MAX_CONTROL_BODY_BYTES` |
| one SSE event | `MAX_SSE_EVENT_BYTES` |
| one chunk-size line of a chunked body | `MAX_CHUNK_LINE_BYTES` |
| a token count in a stream | `MAX_TOKEN_COUNT` |
| content chunks kept per request | `max_chunks(output_len)` |
| `--output-len` | `MAX_OUTPUT_LEN` |
| a time option (timeouts, durations) | `MAX_SECONDS` |
| a stop's grace (`--grace`, `stop_timeout`) | `MAX_GRACE_S` |
| the local `ssh.log` | `LOG_MAX_BYTES` x (`LOG_BACKUPS` + 1) |
| requests per level, warm-up requests | `MAX_REQUESTS` |
| `bench --repeats` (whole sweeps), `tune --repeats` (passes) | `MAX_REPEATS` |
| `bench --processes` | `MAX_PROCESSES` |
| `--check-greedy` prompts | `MAX_GREEDY` |
| a run id (`compare`, `report`, `export`) | `MAX_RUN_ID` (SQLite's largest rowid) |
| a TCP port | 1 to `MAX_PORT` |
| a process id (`adopt --pid`) | `MAX_PID` (Linux's largest `pid_max`) |
| tensor parallel size (`sim --tp`) | `MAX_TP` |
| `logs -n`, `runs -n` | `MAX_LINES` |
| `--time-scale` of the simulator (demo, tune demo) | `MAX_TIME_SCALE` |

Every numeric option is parsed by one of the `*_option` types at the end of this module, declared once in
`specdash.cli.options` (or `specdash.sim.args` for the simulator's own flags): two commands that take the
same option judge its value the same way.
| one log line (replay, status, logs -f) | `MAX_LOG_LINE_CHARS`, longer lines are cut into pieces |
| the log tail `logs -n` and `status` read | `LOG_TAIL_BYTES` (the log's last bytes) |
| interim (1xx) responses before a request's final one | `MAX_INTERIM_RESPONSES` |
| a control-plane read (`/server_info`, `/metrics`, `/health`) | its timeout for the WHOLE answer, not per read |
"""

from __future__ import annotations

import argparse
import math
import os
import stat
from collections.abc import Callable
from pathlib import Path

from specdash.errors import UsageError

MAX_CONFIG_BYTES = 1024 * 1024
"""A config file larger than this is refused (a real one is a few KiB)."""
MAX_EXTENDS_DEPTH = 32
"""The deepest `extends` chain of modes (a real one is 1 to 3 deep)."""
MAX_KNOWN_HOSTS_BYTES = 64 * 1024 * 1024
"""A known_hosts file larger than this is refused (100,000 hosts take about 10 MiB)."""
MAX_PROMPTS_BYTES = 64 * 1024 * 1024
"""A `--prompts` JSONL file larger than this is refused."""
MAX_CONTROL_BODY_BYTES = 16 * 1024 * 1024
"""A control-plane response body larger than this fails that poll (SGLang's `/server_info` is ~10 KiB)."""
MAX_SSE_EVENT_BYTES = 4 * 1024 * 1024
"""One SSE event larger than this fails the request (the final `/generate` chunk carries the whole text)."""
MAX_INTERIM_RESPONSES = 16
"""Interim responses (`100 Continue`, `103 Early Hints`) skipped before a request's final response; more fail
the request as malformed (RFC 9110 15.2 allows any number; a server sending them forever is broken)."""
MAX_CHUNK_LINE_BYTES = 4096
"""A chunk-size line (hex size, extensions) longer than this fails the request."""
MAX_TOKEN_COUNT = 10**9
"""A `completion_tokens` count above this is not a count: the request fails as malformed."""
MAX_CONCURRENCY = 1024
"""The largest concurrency level (and `--max-concurrency`)."""
MAX_OUTPUT_LEN = 1_000_000
"""The largest `--output-len`."""
MAX_SECONDS = 7 * 86400.0
"""The largest time option (a week)."""
MAX_GRACE_S = 3600.0
"""The longest SIGTERM-to-SIGKILL grace (`down --grace`, a mode's `stop_timeout`)."""
LOG_MAX_BYTES = 5 * 1024 * 1024
"""`ssh.log` is rotated at this size."""
LOG_BACKUPS = 3
"""Rotated `ssh.log` files kept."""
MAX_REQUESTS = 1_000_000
"""Upper bound on `--requests-per-level` and `--warmup`."""
MAX_REPEATS = 20
"""Upper bound on `--repeats` (every load loop is bounded)."""
MAX_PROCESSES = 64
"""Upper bound on `--processes`."""
MAX_GREEDY = 1000
"""Upper bound on `--check-greedy`."""
MAX_RUN_ID = 2**63 - 1
"""The largest run id (SQLite's largest rowid): a larger one is a usage error, not an overflow in the store."""
MAX_PORT = 65535
"""The largest TCP port."""
MAX_PID = 4_194_304
"""The largest process id Linux hands out (`pid_max` limit, 2^22)."""
MAX_TP = 1024
"""The largest tensor-parallel size (`sim --tp`)."""
MAX_LINES = 1_000_000
"""Upper bound on line and row counts (`logs -n`, `runs -n`)."""
MAX_TIME_SCALE = 100.0
"""Upper bound on a simulator's `--time-scale` (startup durations x this)."""
MAX_LOG_LINE_CHARS = 64 * 1024
"""A server log line longer than this is cut into pieces of this size (a file of NULs has no line breaks)."""
LOG_TAIL_BYTES = 4 * 1024 * 1024
"""`logs -n N` and `status` read at most the last this many bytes of a server log (a log truncated in place
by another program can start with a hole of NULs the size of what it held)."""


def max_chunks(output_len: int) -> int:
    """Content chunks kept for one request: a server that ignores `max_new_tokens` fails at this many."""
    return 2 * output_len + 1024


def read_regular_file(path: Path, limit: int, what: str) -> bytes:
    """The bytes of `path`, refusing anything but a regular file of at most `limit` bytes.

    Opened non-blocking so that a FIFO cannot hang the open; `/dev/zero`, directories and sockets are
    refused by type before a byte is read; the read stops at `limit + 1` bytes whatever the file claims.

    Raises:
        FileNotFoundError: When `path` does not exist (callers decide whether that is an error).
        UsageError: For anything else that is wrong, naming `what` and `path`.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"cannot read {what} {path}: not a regular file")
        if st.st_size > limit:
            raise UsageError(f"cannot read {what} {path}: {st.st_size} bytes, more than the limit of {limit}")
        chunks: list[bytes] = []
        got = 0
        while got <= limit:
            block = os.read(fd, min(1 << 20, limit + 1 - got))
            if not block:
                break
            chunks.append(block)
            got += len(block)
        if got > limit:
            raise UsageError(f"cannot read {what} {path}: more than the limit of {limit} bytes")
        return b"".join(chunks)
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _number(text: str) -> float:
    if not text.isascii():  # float() reads other scripts' digits ("１２"); a typo there is not a number we mean
        raise argparse.ArgumentTypeError(f"expected a number, got {_shown(text)}")
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {_shown(text)}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {_shown(text)}")
    return value


def _shown(text: str) -> str:
    """`text` quoted for a message, shortened when it is long (a 5,000-digit value is not echoed whole)."""
    return repr(text) if len(text) <= 40 else f"{text[:20]!r}... ({len(text)} characters)"


def number_option(low: float, high: float, *, low_open: bool = False) -> Callable[[str], float]:
    """An argparse `type=` for a finite float in `[low, high]` (`(low, high]` with `low_open`).

    argparse turns the `ArgumentTypeError` into "argument --flag: ..." with exit 2, naming the option.
    """

    def parse(text: str) -> float:
        value = _number(text)
        if (value <= low if low_open else value < low) or value > high:
            left = f"more than {low:g}" if low_open else f"at least {low:g}"
            raise argparse.ArgumentTypeError(f"must be {left} and at most {high:g}, got {_shown(text)}")
        return value

    return parse


def int_option(low: int, high: int) -> Callable[[str], int]:
    """An argparse `type=` for a whole number in `[low, high]`, of any length (compared as an integer, never
    through a float, and refused by its digit count before Python's own 4,300-digit limit is reached)."""

    def parse(text: str) -> int:
        digits = text.strip()
        body = digits[1:] if digits[:1] in "+-" else digits
        if not body.isascii() or not body.isdigit():
            raise argparse.ArgumentTypeError(f"expected a whole number, got {_shown(text)}")
        # More digits than the bounds have cannot be in range (leading zeros aside): no int() of 10,000 digits.
        if len(body.lstrip("0")) > max(len(str(abs(low))), len(str(abs(high)))):
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, got {_shown(text)}")
        value = int(digits, 10)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, got {_shown(text)}")
        return value

    return parse


SECONDS = number_option(0.0, MAX_SECONDS, low_open=True)
"""A positive, finite time option of at most `MAX_SECONDS`."""
GRACE = number_option(0.0, MAX_GRACE_S)
"""Seconds between SIGTERM and SIGKILL, 0 to `MAX_GRACE_S`."""
PORT = int_option(1, MAX_PORT)
"""A TCP port."""
PID = int_option(1, MAX_PID)
"""A process id."""
TP = int_option(1, MAX_TP)
"""A tensor-parallel size."""
RUN_ID = int_option(1, MAX_RUN_ID)
"""A stored run's id."""
TIME_SCALE = number_option(0.0, MAX_TIME_SCALE, low_open=True)
"""A simulator's startup-duration factor."""
FRACTION = number_option(0.0, 1.0, low_open=True)
"""A number in (0, 1]."""
