"""Start, stop, attach to and switch servers on a host, through remote shell scripts.

The scripts live in `scripts/` beside this module and are sent as standard input to `bash -s`, with every
value passed as a positional argument (never spliced into shell text). State on the host:
`~/.specdash/runs/<run-id>/` holds `run.json` (command, mode, engine, port, log path), `pid`
("PID PGID START"), `server.log` and, after a stop, `stopped`; `~/.specdash/current` names the live run.
Directories are 0700 and files 0600 (the scripts set `umask 077`). Any specdash instance re-attaches from
that record instead of launching twice.
"""

from __future__ import annotations

import json
import math
import re
import secrets
import shlex
import time
import uuid
from dataclasses import dataclass, field
from importlib import resources

from specdash.config import HostConfig, ModeConfig
from specdash.errors import SpecdashError
from specdash.redact import redact_argv
from specdash.remote.host import Host, RunResult
from specdash.safetext import escape_controls
from specdash.server.launch import launch_argv, launch_env
from specdash.server.slurm_job import GPU_HELD_MIB


class ServerAlreadyRunning(SpecdashError):
    """A specdash run is already live on the host; attach to it or stop it first."""

    def __init__(self, host: str, run_id: str, pid: int) -> None:
        super().__init__(
            f"a server started by specdash is already running on {host} (run {run_id}, pid {pid}); "
            f"attach to it, or stop it first with 'specdash down {host}'"
        )
        self.run_id = run_id
        self.pid = pid


class PortBusy(SpecdashError):
    """Something else listens on the server's port: refused before the (long) load starts."""

    def __init__(self, host: str, port: int, listener: str) -> None:
        who = _listener_process(listener)
        m = re.search(r",pid=(\d+)", listener)
        self.pid = int(m.group(1)) if m else None
        """The listening process, when the SSH user can see it (then it may be adopted)."""
        adopt = f"adopt it with 'specdash adopt {host} --port {port}', " if self.pid is not None else ""
        super().__init__(
            f"port {port} on {host} is already in use{f' by {who}' if who else ''}; "
            f"{adopt}stop that process or give the mode another port (refused before launching)"
        )
        self.port = port
        self.listener = listener


def _listener_process(ss_line: str) -> str:
    """`users:(("python3",pid=123,fd=3))` -> `python3 (pid 123)`; '' when ss could not see the process."""
    m = re.search(r'users:\(\("([^"]+)",pid=(\d+)', ss_line)
    return f"{m.group(1)} (pid {m.group(2)})" if m else ""


@dataclass(frozen=True)
class RunRecord:
    """A server launched by specdash, as recorded on the host."""

    id: str
    """The run id (directory name under `~/.specdash/runs/`)."""
    mode: str
    """The mode it was started in."""
    engine: str
    """`sglang` or `vllm`."""
    port: int
    """The server's HTTP port on the host."""
    pid: int
    """The launched process (the engine's main process)."""
    pgid: int
    """Its process group: every engine child is in it."""
    started_at: float
    """Launch time, seconds since the epoch (the host's clock)."""
    log_path: str
    """The server's combined stdout/stderr on the host."""
    command: tuple[str, ...] = ()
    """The argv that was launched."""
    alive: bool = True
    """Whether the main process (or any member of its group) was alive when this record was read."""
    log_size: int = 0
    """The log's size in bytes when this record was read."""
    adopted: bool = False
    """True for a server started by hand that specdash adopted (`specdash.server.adopt`)."""
    damaged: bool = False
    """The pid file (or `current`) was empty or half-written: nothing of this run can be verified or signalled,
    and whether its server still runs is unknown (`alive` is False only because nothing can be checked)."""
    job_id: str = ""
    """A Slurm host's run: the batch job (`server.slurm`); pid and pgid are 0 then (the job owns the processes)."""
    server_host: str = "127.0.0.1"
    """Where the server listens, as the host reaches it: its loopback, or a Slurm job's head node address."""
    nodes: int = 1
    """Nodes the run spans (one engine rank per node)."""
    head_node: str = ""
    """A Slurm job's head node by its Slurm name (where the probe agent's step runs), once the job said it."""


def _int(value: object) -> int:
    return int(value) if isinstance(value, int) or (isinstance(value, str) and value.isdigit()) else 0


def damaged_record(run_id: str, meta: dict[str, object]) -> RunRecord:
    """A run whose record cannot be trusted: no pid to verify or signal, its liveness unknown."""
    return RunRecord(
        id=run_id,
        mode=escape_controls(str(meta.get("mode", "?"))),
        engine=escape_controls(str(meta.get("engine", "?"))),
        port=_int(meta.get("port")),
        pid=0,
        pgid=0,
        started_at=0.0,
        log_path="",
        alive=False,
        damaged=True,
    )


def _float(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        return 0.0


@dataclass
class StopReport:
    """What a stop did, for the user."""

    run_id: str
    was_running: bool = False
    """False when nothing of the run was alive anymore."""
    members: list[str] = field(default_factory=list)
    """The group's processes when the stop began ("PID ARGS")."""
    killed: list[str] = field(default_factory=list)
    """Processes that ignored SIGTERM for the grace period and got SIGKILL."""
    survivors: list[str] = field(default_factory=list)
    """Processes still alive after SIGKILL (should be empty)."""
    port_free: bool = True
    """Whether the port was free at the end."""
    port_listener: str = ""
    """Who still listens, if the port is not free."""
    gpu_memory_mib: list[tuple[int, int]] = field(default_factory=list)
    """(GPU index, MiB used) after the stop, on hosts with nvidia-smi."""
    gpu_after: list[tuple[str, int, int]] = field(default_factory=list)
    """(node, GPU index, MiB used) on each node of a Slurm job once its engine had exited, where nvidia-smi
    answers there (the job's own last look)."""
    seconds: float = 0.0
    """How long the stop took."""

    @property
    def gpu_held(self) -> list[str]:
        """The GPUs of `gpu_after` that still held memory, in words."""
        return [
            f"GPU{index} on {escape_controls(node)} still holds {mib / 1024:.1f} GiB after the job ended"
            for node, index, mib in self.gpu_after
            if mib > GPU_HELD_MIB
        ]

    def summary(self) -> str:
        """One or two lines for the terminal."""
        if not self.was_running:
            head = f"run {self.run_id} was not running"
        else:
            head = f"stopped run {self.run_id} ({len(self.members)} process(es)) in {self.seconds:.1f} s"
            if self.killed:
                head += f"; {len(self.killed)} ignored SIGTERM and were killed"
        parts = [head]
        if self.survivors:
            parts.append("still alive: " + "; ".join(self.survivors))
        if not self.port_free:
            parts.append(f"port still in use: {self.port_listener}")
        if self.gpu_held:
            parts.append("; ".join(self.gpu_held) + " (a process of the engine may live on: nvidia-smi there)")
        elif self.gpu_after:
            nodes = sorted({node for node, _, _ in self.gpu_after})
            most = max(mib for _, _, mib in self.gpu_after)
            parts.append(f"GPU memory released on {', '.join(nodes)}: at most {most} MiB used a GPU after the stop")
        if self.gpu_memory_mib:
            parts.append("GPU memory in use: " + ", ".join(f"GPU{i} {m} MiB" for i, m in self.gpu_memory_mib))
        return "\n".join(parts)


def _script(name: str) -> str:
    files = resources.files("specdash.server").joinpath("scripts")
    return files.joinpath("common.sh").read_text() + "\n" + files.joinpath(name).read_text()


async def run_script(
    host: Host, name: str, *args: str, state_dir: str = "~/.specdash", timeout: float = 30.0
) -> ScriptResult:
    """Run `scripts/<name>` on the host with `args` as literal positional arguments.

    Each call gets a fresh tag; the scripts start every reply line with it (`say`), so that output of
    the login shell (a banner from `~/.bashrc`) is never read as a reply.
    """
    tag = "@sd-" + secrets.token_hex(6)
    command = f"SPECDASH_HOME={shlex.quote(state_dir)} SPECDASH_TAG={tag} bash -s -- {shlex.join(args)}"
    result = await host.run(command, timeout=timeout, stdin=_script(name))
    return ScriptResult(result, _replies(result.stdout, tag))


async def run_framed(host: Host, command: str, timeout: float = 60.0) -> tuple[RunResult, str]:
    """Run a shell `command` whose stdout is data (a log tail); returns the result and that stdout without
    whatever the login shell printed before it (a `~/.bashrc` banner), cut at a fresh tag line printed first."""
    tag = "@sd-" + secrets.token_hex(6)
    result = await host.run(f"printf '%s\\n' {tag}; {command}", timeout=timeout)
    out, head = result.stdout, tag + "\n"
    if out.startswith(head):
        return result, out[len(head) :]
    at = out.find("\n" + head)
    return result, (out[at + 1 + len(head) :] if at >= 0 else out)


@dataclass(frozen=True)
class ScriptResult:
    """A script's run: the raw result and its tagged reply lines as (word, rest)."""

    raw: RunResult
    lines: list[tuple[str, str]]

    @property
    def ok(self) -> bool:
        return self.raw.ok

    @property
    def exit_status(self) -> int:
        return self.raw.exit_status

    @property
    def stderr(self) -> str:
        return self.raw.stderr

    @property
    def stdout(self) -> str:
        return self.raw.stdout

    def detail(self) -> str:
        """What to show when the script failed: its replies, else stderr, else the exit status."""
        said = "; ".join(f"{w} {r}".strip() for w, r in self.lines)
        return escape_controls(said or self.raw.stderr.strip()[-500:]) or f"exit status {self.raw.exit_status}"


def _unescape(text: str) -> str:
    return re.sub(r"\\(\\|n)", lambda m: "\n" if m.group(1) == "n" else "\\", text)


def _replies(stdout: str, tag: str) -> list[tuple[str, str]]:
    out = []
    prefix = tag + " "
    # Split on LF alone: `say` escapes only LF and backslash, and `str.splitlines` would also break a value
    # (a path) at a CR, a form feed, \x1c-\x1e, NEL or U+2028.
    for line in stdout.split("\n"):
        if not line.startswith(prefix):
            continue  # a login banner, or anything else that is not the script's reply
        # Not stripped: a value (a path) may end in a space or an (escaped) newline of its own.
        word, _, rest = _unescape(line[len(prefix) :]).partition(" ")
        if word:
            out.append((word, rest))
    return out


def _unsafe(result: ScriptResult, host: str) -> SpecdashError | None:
    """The refusal of a state dir that another user owns or can write (exit 30), or None."""
    if result.exit_status == 30:
        why = next((rest for word, rest in result.lines if word == "unsafe"), "")
        return SpecdashError(
            f"refusing the state directory on {host}: {escape_controls(why)}; fix its owner/permissions"
        )
    return None


class Lifecycle:
    """Server operations on one host."""

    def __init__(self, host: Host, host_config: HostConfig) -> None:
        self.host = host
        self.config = host_config

    async def current(self, run_id: str = "") -> RunRecord | None:
        """The current run (or `run_id`) as recorded on the host, or None when there is none."""
        result = await run_script(
            self.host, "status.sh", *([run_id] if run_id else []), state_dir=self.config.state_dir
        )
        if (unsafe := _unsafe(result, self.config.name)) is not None:
            raise unsafe
        if not result.ok:
            raise SpecdashError(f"cannot read the run record on {self.config.name}: {result.detail()}")
        fields = dict(result.lines)
        if "badcurrent" in fields:  # `current` is empty or garbled: which run it named cannot be told
            return damaged_record("?", {})
        if "id" not in fields:
            return None
        try:
            meta = json.loads(fields.get("meta", "{}"))
        except (json.JSONDecodeError, RecursionError):
            meta = {}
        if not isinstance(meta, dict):
            meta = {}
        if "badrecord" in fields or "pid" not in fields:
            # An empty or half-written pid file (a full disk at launch): nothing can be verified, so
            # nothing is signalled; the run counts as dead and a new launch replaces it.
            return damaged_record(escape_controls(fields["id"]), meta)
        pid, pgid, started = (fields["pid"].split() + ["0", "0", "0"])[:3]
        size, _, log_path = fields.get("log", "").partition(" ")
        command = meta.get("command", ())
        return RunRecord(
            id=fields["id"],
            mode=escape_controls(str(meta.get("mode", "?"))),  # the host's word: shown, never acted on raw
            engine=escape_controls(str(meta.get("engine", "sglang"))),
            port=_int(meta.get("port")),
            pid=_int(pid),
            pgid=_int(pgid),
            started_at=_float(started),
            log_path=log_path,
            command=tuple(escape_controls(str(c)) for c in command) if isinstance(command, list) else (),  # shown
            alive="alive" in fields and "stopped" not in fields,
            log_size=_int(size),
            adopted=bool(meta.get("adopted", False)),
        )

    async def start(self, mode: ModeConfig) -> RunRecord:
        """Launch `mode` detached; refuse a live run or a busy port before anything is launched."""
        run_id = time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]
        argv = launch_argv(mode, self.config)
        env = [f"{k}={v}" for k, v in launch_env(mode, self.config).items()]
        # The record on the host (and the command line, which the local SSH log shows) gets the argv
        # with its secrets redacted; the real argv goes to the launch only.
        meta = json.dumps({"mode": mode.name, "engine": mode.engine, "port": mode.port, "command": redact_argv(argv)})
        result = await run_script(
            self.host,
            "start.sh",
            run_id,
            str(mode.port),
            self.config.workdir,
            meta,
            str(len(env)),
            *env,
            *argv,
            state_dir=self.config.state_dir,
        )
        if (unsafe := _unsafe(result, self.config.name)) is not None:
            raise unsafe
        word, rest = (result.lines or [("", "")])[-1]
        if result.exit_status == 10 and word == "live":
            other_id, pid = rest.split()[:2]
            raise ServerAlreadyRunning(self.config.name, other_id, int(pid))
        if result.exit_status == 11 and word == "busy":
            raise PortBusy(self.config.name, mode.port, escape_controls(rest))
        if result.exit_status == 12:
            raise SpecdashError(f"working directory {self.config.workdir!r} does not exist on {self.config.name}")
        if result.exit_status == 13:
            raise SpecdashError(f"'setsid' is not installed on {self.config.name} (util-linux)")
        if result.exit_status == 14:
            raise SpecdashError(
                f"cannot write the run record {escape_controls(rest)} on {self.config.name} "
                "(disk full or not writable?); nothing was left running"
            )
        if not result.ok or word != "started":
            raise SpecdashError(f"launching {mode.name!r} on {self.config.name} failed: {result.detail()}")
        record = await self.current(run_id)
        if record is None:
            raise SpecdashError(f"run {run_id} vanished right after launch on {self.config.name}")
        return record

    async def members(self, record: RunRecord) -> list[str]:
        """The live members of the run's process group ("PID ARGS"), e.g. what a crash left behind."""
        result = await run_script(self.host, "members.sh", record.id, state_dir=self.config.state_dir)
        return [escape_controls(" ".join(rest.split())) for word, rest in result.lines if word == "member"]

    async def stop(self, record: RunRecord, grace: float = 30.0) -> StopReport:
        """SIGTERM the run's process group, SIGKILL it after `grace` seconds, verify nothing is left."""
        began = time.monotonic()
        result = await run_script(
            self.host,
            "stop.sh",
            record.id,
            str(math.ceil(grace)),  # whole seconds: `1e-05` or `1e+06` would break the script's arithmetic
            str(record.port),
            state_dir=self.config.state_dir,
            timeout=grace + 30.0,
        )
        report = StopReport(run_id=escape_controls(record.id))
        if (unsafe := _unsafe(result, self.config.name)) is not None:
            raise unsafe
        for word, said in result.lines:
            rest = escape_controls(said)  # process command lines and listeners: the host's text, for the terminal
            if word == "member":
                report.members.append(rest)
            elif word == "killed":
                report.killed.append(rest)
            elif word == "survivor":
                report.survivors.append(rest)
            elif word == "portbusy":
                report.port_free, report.port_listener = False, rest
            elif word == "gpumem":
                idx, _, mib = rest.partition(",")
                if idx.strip().isdigit() and mib.strip().isdigit():
                    report.gpu_memory_mib.append((int(idx), int(mib)))
        report.was_running = bool(report.members)
        report.seconds = time.monotonic() - began
        if not result.ok and result.exit_status not in (20, 23):  # 23: survivors, reported
            raise SpecdashError(f"stopping run {record.id} on {self.config.name} failed: {result.detail()}")
        return report
