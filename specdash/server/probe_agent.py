"""`HostRunner`: the sweep's probe runs on the host, next to the server; only records cross the link.

The same interface as the local runners of `specdash.bench.sweep` (`run_level(plans, on_message)`,
`abort(reason)`, `close()`), so the sweep does not care where its probe runs. Per sweep:

1. `prepare()`: the host's Python (`python3`) must be >= `MIN_PYTHON`, else `AgentUnavailable` with one
   clear line (the caller falls back to the local probe and says so in the run's record); the zipapp is
   uploaded to `~/.specdash/agent/` unless a file of that content hash is there already; the job (URL on
   the host's loopback, settings, prompts) is uploaded once.
2. Per level (and per warmup): one agent process, started as a tagged streamed command (`SSHHost.stream`:
   reaped by PID like every remote process, SIGTERM when the stream is closed), writing each record to
   `~/.specdash/agent/runs/<run>/<n>.jsonl` before sending it. Its records are turned back into samples on
   the local clock (offset from its `hello`) and handed to the sweep as they arrive.
3. `abort()` sends SIGUSR1 to the agent (stop sending; in-flight requests finish and are reported).

A different protocol version is refused on either side. An agent that crashes fails the level with the tail
of its traceback (`last_failure`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import shlex
import time
import uuid
from collections import deque
from dataclasses import replace
from typing import Any

from specdash.bench.agent.bundle import TOO_OLD_EXIT, Bundle, build
from specdash.bench.agent.wire import (
    MIN_PYTHON,
    PROTOCOL,
    job_to_dict,
    outcome_from_dict,
    plan_to_dict,
    sample_from_list,
)
from specdash.bench.hostprobe import AgentUnavailable
from specdash.bench.probe import LevelOutcome, LevelPlan, ProbeSettings
from specdash.bench.workers import LevelSink
from specdash.remote.ssh import SSHHost
from specdash.remote.ssherror import SSHError

AGENT_DIR = ".specdash/agent"
"""Relative to the remote user's home."""
TAIL_LINES = 40
"""Lines of an agent's non-record output kept for a failure message."""

Message = tuple[Any, ...]


def parse_python_version(text: str) -> tuple[int, ...] | None:
    """`3.11.2` -> (3, 11, 2); None for anything else (no python3 on the host)."""
    words = text.strip().split(".")
    if len(words) < 2 or not all(w.isdigit() for w in words):
        return None
    return tuple(int(w) for w in words)


def check_hello(record: dict[str, Any]) -> str | None:
    """Why an agent's first record is unacceptable, or None (a version mismatch is never mixed)."""
    if record.get("t") == "refused":
        return str(record.get("why") or "the agent refused to run")
    if record.get("t") != "hello":
        return f"the agent said {str(record)[:120]!r} instead of hello"
    if record.get("v") != PROTOCOL:
        return f"agent version {record.get('v')} differs from the client's {PROTOCOL}: refused"
    return None


class HostRunner:
    """Runs the probe on `host` against `remote_url` (the server as the host sees it)."""

    where = "host"

    def __init__(
        self, host: SSHHost, remote_url: str, settings: ProbeSettings, prompts: tuple[str, ...], python: str = "python3"
    ) -> None:
        self.host = host
        self.remote_url = remote_url
        self.settings = settings
        self.prompts = prompts
        self.python = python
        self.python_version = ""
        """The host's Python, once `prepare()` ran."""
        self.last_failure: str | None = None
        """Why the last level's agent failed (its traceback tail), or None."""
        self._bundle: Bundle = build()
        self._run_id = uuid.uuid4().hex[:12]
        self._seq = 0
        self._pid: int | None = None
        self._job = ""
        self._prepared = False

    @property
    def agent_path(self) -> str:
        """Where the zipapp lives on the host (under `~`)."""
        return f"{AGENT_DIR}/{self._bundle.name}"

    async def prepare(self) -> str:
        """`_prepare`, with a failure of the link said as the host being unable to run the agent."""
        try:
            return await self._prepare()
        except SSHError as exc:
            raise AgentUnavailable(f"cannot reach the host to run the probe there: {exc}") from exc

    async def _prepare(self) -> str:
        """Check the host's Python, ship the zipapp if missing, upload the job; return the Python version.

        Raises:
            AgentUnavailable: no usable Python on the host, or the upload failed.
        """
        if self._prepared:
            return self.python_version
        py = shlex.quote(self.python)
        probe = await self.host.run(
            f"command -v {py} >/dev/null 2>&1 && {py} -c 'import sys; print(\"%d.%d.%d\" % sys.version_info[:3])'",
            timeout=30,
        )
        version = parse_python_version(probe.stdout)
        need = ".".join(map(str, MIN_PYTHON))
        if version is None:
            raise AgentUnavailable(
                f"no {self.python} on the host: the probe runs here instead (needs Python >= {need})"
            )
        self.python_version = ".".join(map(str, version))
        if version < MIN_PYTHON:
            raise AgentUnavailable(
                f"the host's {self.python} is {self.python_version}, the probe agent needs >= {need}: "
                "the probe runs here"
            )
        path = self.agent_path
        ship = (
            f"cd && mkdir -p {AGENT_DIR}/runs && if [ ! -s {path} ]; then "
            f"base64 -d > {path}.part && mv {path}.part {path} && echo shipped; else echo cached; fi"
        )
        done = await self.host.run(ship, timeout=60, stdin=base64.b64encode(self._bundle.data).decode())
        if done.exit_status != 0:
            raise AgentUnavailable(f"cannot install the probe agent on the host: {done.stderr.strip()[:200]}")
        self._job = f"{AGENT_DIR}/runs/{self._run_id}/job.json"
        job = json.dumps(job_to_dict(self.remote_url, self.settings, self.prompts))
        put = await self.host.run(
            f"cd && mkdir -p {AGENT_DIR}/runs/{self._run_id} && cat > {self._job}", timeout=60, stdin=job
        )
        if put.exit_status != 0:
            raise AgentUnavailable(f"cannot upload the probe job: {put.stderr.strip()[:200]}")
        self._prepared = True
        return self.python_version

    async def run_level(self, plans: list[LevelPlan], sink: LevelSink) -> list[LevelOutcome | None]:
        """Run the level's plans as one agent on the host (one event loop there holds all C streams)."""
        await self.prepare()
        plan = replace(plans[0], concurrency=sum(p.concurrency for p in plans), index_step=1, first_index=0)
        self._seq += 1
        records = f"{AGENT_DIR}/runs/{self._run_id}/{self._seq}.jsonl"
        command = (
            f"cd && exec {shlex.quote(self.python)} {self.agent_path} --job {self._job} --records {records} "
            f"--expect {shlex.quote(PROTOCOL)} --plan {shlex.quote(json.dumps(plan_to_dict(plan)))}"
        )
        self.last_failure = None
        tail: deque[str] = deque(maxlen=TAIL_LINES)
        outcome: LevelOutcome | None = None
        offset = 0
        hello = False
        try:
            async for line in self.host.stream(command):
                record = _parse(line)
                if record is None:
                    tail.append(line)
                    continue
                kind = record.get("t")
                if not hello:
                    why = check_hello(record)
                    if why is not None:
                        self.last_failure = why
                        break
                    hello = True
                    self._pid = int(record["pid"])
                    offset = time.perf_counter_ns() - int(record["now"])
                    continue
                if kind == "s":
                    sink.sample(0, sample_from_list(record["d"], offset))
                elif kind == "k":
                    arrivals = [(int(t) + offset, int(n)) for t, n in record["a"]]
                    sink.tick(0, arrivals, int(record["i"]), int(record["now"]) + offset)
                elif kind == "done":
                    outcome = outcome_from_dict(record["o"])
                    continue
                elif kind == "crash":
                    tail.extend(str(record.get("tb", "")).splitlines())
                    continue
        except SSHError as exc:
            self.last_failure = f"probe agent lost: {exc}"
        finally:
            self._pid = None
        if outcome is None and self.last_failure is None:
            text = "\n".join(tail).strip()
            if TOO_OLD_EXIT and "needs Python" in text:
                self.last_failure = text.splitlines()[-1]
            else:
                self.last_failure = "probe agent failed" + (f":\n{text[-2000:]}" if text else " without a word")
        return [outcome]

    def abort(self, reason: str) -> None:
        """Ask the running agent to stop sending (SIGUSR1); its in-flight requests finish and are reported."""
        pid = self._pid
        if pid is not None:
            task = asyncio.ensure_future(self._signal(pid))
            task.add_done_callback(lambda t: t.exception())

    async def _signal(self, pid: int) -> None:
        with contextlib.suppress(SSHError, OSError):
            await self.host.run(f"kill -USR1 {pid}", timeout=10)

    async def close(self) -> None:
        """Remove this sweep's job file (the records stay until the next sweep's clean-up)."""
        if self._prepared:
            with contextlib.suppress(SSHError, OSError):
                await self.host.run(f"cd && rm -f {self._job}", timeout=10)


def _parse(line: str) -> dict[str, Any] | None:
    if not line.startswith("{"):
        return None
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None
