"""`HostRunner`: the sweep's probe runs on the host, next to the server; only records cross the link.

The same interface as the local runners of `specdash.bench.sweep` (`run_level(plans, on_message)`,
`abort(reason)`, `close()`), so the sweep does not care where its probe runs. Per sweep:

1. `prepare()`: the host's Python (`python3`) must be >= `MIN_PYTHON`, else `AgentUnavailable` with one
   clear line (the caller falls back to the local probe and says so in the run's record); the zipapp is
   uploaded to `~/.specdash/agent/` unless a file of that content hash is there already; the job (URL on
   the host's loopback, settings, prompts) is uploaded once.
2. Per level (and per warmup): one agent process, started tagged and detached (`SSHHost.start_detached`:
   no channel attached, so a link cut does not stop it; the reap after a reconnect spares it, closing the
   `SSHHost` reaps it), writing each record to `~/.specdash/agent/runs/<run>/<n>.jsonl`. A follower,
   streamed over SSH with pings on its stdin, copies that file to us; its records are turned back into
   samples on the local clock (offset from its `hello`) and handed to the sweep as they arrive.
3. A link cut mid-level: the agent measures on (the link is not on its path to the server); this waits up
   to `link_wait_s` for the reconnect and follows the file again after the last sample it handed on, so no
   finished request is lost or stored twice. The agent ends by itself once pings have stopped for longer
   than `link_wait_s` (a client that never comes back: a kill of specdash, a link gone for good).
4. `abort()` sends SIGUSR1 to the agent (stop sending; in-flight requests finish and are reported);
   `close()` sends SIGTERM to an agent whose level did not end (cancelled).
5. Orphans: an agent whose specdash was killed runs on until its `link_wait` is over. `stop_agents` ends
   them sooner, found by their tag and the URL they load (`scripts/agents.sh`): `down` stops every agent
   loading the server it stops, and `prepare()` the agents loading the same server whose client stopped
   pinging more than `ORPHAN_IDLE_S` ago (they would load the server under the new sweep).

On a Slurm host (`launch`: `srun --jobid=JOB --overlap --nodelist=HEAD`) the agent runs as a step of the
server's own job on its head node, against the head node's address, and the files above are on the shared
home; the follower, the pings and the signals stay on the login node (srun passes SIGUSR1 and SIGTERM on to
the step). Each agent's first record says where it ran (`ran_on`).

A different protocol version is refused on either side. An agent that crashes fails the level with the tail
of its traceback (`last_failure`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import math
import secrets
import shlex
import time
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from specdash.bench.agent.bundle import TOO_OLD_EXIT, Bundle, build
from specdash.bench.agent.main import PING_GRACE_S
from specdash.bench.agent.wire import (
    MIN_PYTHON,
    PROTOCOL,
    job_to_dict,
    outcome_from_dict,
    plan_to_dict,
    sample_from_list,
)
from specdash.bench.gauges import POLL_NAMES
from specdash.bench.hostprobe import AgentUnavailable
from specdash.bench.probe import LevelOutcome, LevelPlan, ProbeSettings
from specdash.bench.workers import LevelSink
from specdash.remote.events import ConnectionState
from specdash.remote.host import Host
from specdash.remote.ssh import SSHHost
from specdash.remote.ssherror import SSHError, SSHErrorKind
from specdash.safetext import escape_controls
from specdash.server.lifecycle import run_script

AGENT_DIR = ".specdash/agent"
"""Relative to the remote user's home."""
PING_S = 1.0
"""The client pings its follower this often; the agent counts the client gone once pings stop (see `main`)."""
TAIL_LINES = 40
"""Lines of an agent's non-record output kept for a failure message."""

ORPHAN_IDLE_S = PING_GRACE_S
"""An agent whose client has not pinged for this long is an orphan to a new sweep on the same server (the
agent's own limit is `link_wait` plus this)."""
STOP_GRACE_S = 5.0
"""`stop_agents`: SIGTERM, then SIGKILL after this long."""

Message = tuple[Any, ...]
log = logging.getLogger(__name__)


def loopback_url(port: int, server_host: str = "") -> str:
    """The server as an agent on its host reaches it (also what `stop_agents` matches agents by): its loopback,
    or the address it listens on (a Slurm job's head node, `RunRecord.server_host`)."""
    address = server_host or "127.0.0.1"
    return f"http://{f'[{address}]' if ':' in address else address}:{port}"


async def stop_agents(host: Host, url: str, *, idle_s: float | None = None) -> list[int]:
    """Stop the probe agents on `host` that load `url` (all, or with `idle_s` only those whose client has not
    pinged for longer); return their PIDs. Only processes carrying a specdash client's detached tag are
    signalled (SIGTERM, SIGKILL after `STOP_GRACE_S`): see `scripts/agents.sh`."""
    idle = "-1" if idle_s is None else str(math.ceil(idle_s))
    result = await run_script(host, "agents.sh", url, idle, str(math.ceil(STOP_GRACE_S)), timeout=STOP_GRACE_S + 30)
    return [int(rest.split()[0]) for word, rest in result.lines if word == "stopped" and rest.split()[0].isdigit()]


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
        self,
        host: SSHHost,
        remote_url: str,
        settings: ProbeSettings,
        prompts: tuple[str, ...],
        python: str = "python3",
        link_wait_s: float = 600.0,
        launch: Sequence[str] = (),
    ) -> None:
        self.host = host
        self.launch = tuple(launch)
        """Words the agent's command runs under (a Slurm host: `srun` of a step in the server's job on its head
        node, `SlurmLifecycle.step_argv`); empty: the agent runs on the host itself."""
        self.ran_on: dict[str, str] = {}
        """Where the last level's agent said it ran (its `where` record: host, node, job, step; escaped)."""
        self.remote_url = remote_url
        self.settings = settings
        self.prompts = prompts
        self.python = python
        self.link_wait_s = link_wait_s
        """How long a level waits for a lost link (the agent goes on meanwhile); 0: the level fails at once."""
        self.metrics_poll_s = 0.0
        """The agent reads the server's gauges this often during a level (0: not); see `HostProbe`."""
        self.resumes = 0
        """How many times a level's records were followed again after a reconnect."""
        self.records_path = ""
        """The last level's record file on the host (under `~`)."""
        self.python_version = ""
        """The host's Python, once `prepare()` ran."""
        self.last_failure: str | None = None
        """Why the last level's agent failed (its traceback tail), or None."""
        self.orphans_stopped: list[int] = []
        """PIDs of other clients' orphaned agents that `prepare()` stopped (see `stop_agents`)."""
        self._bundle: Bundle = build()
        self._run_id = uuid.uuid4().hex[:12]
        self._seq = 0
        self._pid: int | None = None
        self._job = ""
        self._prepared = False

    @property
    def run_dir(self) -> str:
        """This sweep's directory on the host (under `~`): the job, and per agent run `<n>.jsonl` (its
        records), `<n>.alive` (touched by the client's pings), `<n>.log` (its output)."""
        return f"{AGENT_DIR}/runs/{self._run_id}"

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
        py, path = shlex.quote(self.python), self.agent_path
        self._job = f"{self.run_dir}/job.json"
        # One round trip for the Python check, the cache check and the job (small; `close()` removes it).
        # Replies carry a fresh tag so that a login banner is never read as one.
        tag = "@sd-" + secrets.token_hex(6)
        look = (
            f"cd && mkdir -p {self.run_dir} && printf %s {shlex.quote(self.remote_url)} > {self.run_dir}/url "
            f"&& cat > {self._job} || echo {tag} job-failed; "
            f"v=$(command -v {py} >/dev/null 2>&1 && {py} -c 'import sys; print(\"%d.%d.%d\" % sys.version_info[:3])'"
            f" 2>/dev/null); echo {tag} python $v; if [ -s {path} ] && "
            f'[ "$(sha256sum < {path} 2>/dev/null | cut -c1-64)" = {self._bundle.sha256} ]; then echo {tag} cached; '
            f"elif [ -e {path} ]; then echo {tag} differs; else echo {tag} missing; fi"
        )
        job = json.dumps(job_to_dict(self.remote_url, self.settings, self.prompts))
        reply = await self.host.run(look, timeout=60, stdin=job)
        said = [line[len(tag) + 1 :].split() for line in reply.stdout.splitlines() if line.startswith(tag + " ")]
        words = {w[0]: w[1:] for w in said if w}
        version = parse_python_version(" ".join(words.get("python", [])))
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
        if "job-failed" in words or reply.exit_status != 0:
            raise AgentUnavailable(f"cannot upload the probe job: {reply.stderr.strip()[:200]}")
        if "cached" not in words:  # shipped once per content hash: an unchanged client is never sent again
            if "differs" in words:
                log.warning("the probe agent at ~/%s on the host does not match its content hash: replaced", path)
            ship = f"cd && mkdir -p {AGENT_DIR} && base64 -d > {path}.part && mv {path}.part {path}"
            done = await self.host.run(ship, timeout=60, stdin=base64.b64encode(self._bundle.data).decode())
            if done.exit_status != 0:
                raise AgentUnavailable(f"cannot install the probe agent on the host: {done.stderr.strip()[:200]}")
        self.orphans_stopped = await stop_agents(self.host, self.remote_url, idle_s=ORPHAN_IDLE_S)
        if self.orphans_stopped:
            log.warning(
                "stopped orphaned probe agents %s loading %s (their specdash is gone)",
                self.orphans_stopped,
                self.remote_url,
            )
        self._prepared = True
        return self.python_version

    async def run_level(self, plans: list[LevelPlan], sink: LevelSink) -> list[LevelOutcome | None]:
        """Run the level's plans as one agent on the host (one event loop there holds all C streams).

        The agent runs detached; a follower streams its record file. When the link drops, the agent goes on
        and this waits up to `link_wait_s` for the reconnect, then follows the file again after the last
        sample handed to `sink`: every finished request reaches `sink` once.
        """
        await self.prepare()
        plan = replace(plans[0], concurrency=sum(p.concurrency for p in plans), index_step=1, first_index=0)
        self._seq += 1
        base = f"{self.run_dir}/{self._seq}"
        records, alive, log = f"{base}.jsonl", f"{base}.alive", f"{base}.log"
        py, agent, expect = shlex.quote(self.python), self.agent_path, shlex.quote(PROTOCOL)
        under = f"{shlex.join(self.launch)} " if self.launch else ""
        start = (
            f"touch {alive} && exec {under}{py} {agent} --job {self._job} --records {records} --alive {alive} "
            f"--link-wait {self.link_wait_s:g} --metrics-every {self.metrics_poll_s:g} --expect {expect} "
            f"--plan {shlex.quote(json.dumps(plan_to_dict(plan)))}"
        )
        self.last_failure = None
        self.records_path = records
        tail: deque[str] = deque(maxlen=TAIL_LINES)
        outcome: LevelOutcome | None = None
        try:
            pid = await self.host.start_detached(start, log)
        except SSHError as exc:
            self.last_failure = f"cannot start the probe agent: {exc}"
            return [None]
        self._pid = pid
        stored = 0  # samples handed to `sink`: the next one expected is number `stored`
        ended = False
        lost = 0  # the link dropped since the last follower said hello
        while not ended:
            follow = (
                f"cd && exec {py} {agent} --follow {records} --after {stored - 1} --pid {pid} --alive {alive} "
                f"--log {log} --expect {expect}"
            )
            offset = 0
            hello = False
            generation = self.host.generation
            try:
                async for line in self.host.stream(follow, ping_s=PING_S):
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
                        offset = time.perf_counter_ns() - int(record["now"])
                        self.resumes += lost
                        lost = 0
                        continue
                    if kind == "s":
                        n = int(record["n"])
                        if n < stored:
                            continue  # never twice (the follower skips these already)
                        sink.sample(0, sample_from_list(record["d"], offset))
                        stored = n + 1
                    elif kind == "k":
                        arrivals = [(int(t) + offset, int(n)) for t, n in record["a"]]
                        sink.tick(0, arrivals, int(record["i"]), int(record["now"]) + offset)
                    elif kind == "m":
                        sink.gauges(_gauges(record.get("m")))
                    elif kind == "where":
                        self.ran_on = _where(record)
                    elif kind == "done":
                        outcome = outcome_from_dict(record["o"])
                    elif kind == "crash":
                        tail.extend(str(record.get("tb", "")).splitlines())
                    elif kind == "gone":
                        tail.extend(str(record.get("log", "")).splitlines())
                ended = True
            except SSHError as exc:
                if exc.kind is not SSHErrorKind.LOST:
                    self.last_failure = f"probe agent lost: {exc}"
                    break
                if self.link_wait_s <= 0:
                    self.last_failure = f"link lost during the level (the agent on the host stops by itself): {exc}"
                    break
                # The agent goes on without us (it is detached): wait for the link, then follow it again.
                try:
                    await self.host.wait_connected(timeout=self.link_wait_s, newer_than=generation)
                except SSHError as again:
                    self.last_failure = f"link lost and not back within {self.link_wait_s:g} s: {again}"
                    break
                lost = 1
        if ended:
            self._pid = None  # it ended (done, crashed or gone); else `close()` stops it
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
        """Stop an agent still running (its level was cancelled) and remove this sweep's job file (the
        records stay until the next sweep's clean-up)."""
        pid, self._pid = self._pid, None
        if self.host.state is not ConnectionState.CONNECTED:
            return  # nothing to wait for: an agent cut off from us ends by itself (see `main`)
        if pid is not None:
            with contextlib.suppress(SSHError, OSError):
                await self.host.run(f"kill -TERM {pid}", timeout=10)
        if self._job:
            with contextlib.suppress(SSHError, OSError):
                await self.host.run(f"cd && rm -f {self._job}", timeout=10)


def _where(record: dict[str, Any]) -> dict[str, str]:
    """A `where` record's fields as short escaped text (the host's word, only shown and stored)."""
    keys = ("host", "node", "job", "step")
    return {k: escape_controls(str(record[k]))[:128] for k in keys if isinstance(record.get(k), str) and record[k]}


def _gauges(values: Any) -> dict[str, float]:
    """An `m` record's gauges, only the names polled and only numbers (the host's word, not trusted further)."""
    if not isinstance(values, dict):
        return {}
    return {
        k: float(v) for k, v in values.items() if k in POLL_NAMES and isinstance(v, (int, float)) and math.isfinite(v)
    }


def _parse(line: str) -> dict[str, Any] | None:
    if not line.startswith("{"):
        return None
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None
