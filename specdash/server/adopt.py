"""Adopting a server specdash did not start (`nohup python -m sglang.launch_server ... &` by hand).

1. `inspect` reads what the process is from `/proc` on the host (`scripts/inspect.sh`, which signals
   nothing): argv, process group, start time, working directory, where stdout and stderr point.
2. `assess` decides what it is: the engine (from the command line), the configured mode it matches (the
   same flags as that mode's launch command) or an unmanaged mode shown with its flags, its port, and its
   log: the file behind `/proc/PID/fd/1` (or `fd/2`), a `--log-file`-style argument, or a path the user
   gives. It lists every reason it cannot be adopted instead of guessing.
3. `adopt` writes an ordinary run record under `~/.specdash/runs/<run-id>/` (`scripts/adopt.sh`; the log
   is linked as `server.log`, `run.json` says `"adopted": true`), so attach, bench and `down` work on it
   like on a server specdash started, and the watcher follows its log from the start of the file.

Stopping is by process group, as for our own runs, so a server is adopted only when it leads its own
group (`setsid`, or `nohup ... &` from an interactive shell): otherwise the group would hold processes
that are not the server (the shell that started it). The session records an adoption as such, never as a
startup: specdash did not watch it from launch, so its phase times teach the ETA nothing.
"""

from __future__ import annotations

import base64
import json
import posixpath
import shlex
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from specdash.config import Config, HostConfig
from specdash.errors import SpecdashError
from specdash.remote.host import Host
from specdash.safetext import escape_controls
from specdash.server.launch import launch_argv
from specdash.server.lifecycle import Lifecycle, RunRecord, ServerAlreadyRunning, run_script

DEFAULT_PORTS = {"sglang": 30000, "vllm": 8000}
"""Each engine's port when the command line gives none."""
LOG_FLAGS = ("log-file", "log", "log-path")
"""Arguments that name a log file, tried when stdout and stderr point at no file."""
_ALIASES = {"model": "model-path", "tp": "tp-size", "tensor-parallel-size": "tp-size"}
"""Flag spellings that mean the same (SGLang accepts `--model` for `--model-path`, `--tp` for `--tp-size`)."""


@dataclass(frozen=True)
class Found:
    """A process on the host, as `/proc` describes it."""

    pid: int
    pgid: int
    sid: int
    started_at: float
    """Start time, epoch seconds (the host's clock), to 1/100 s."""
    argv: tuple[str, ...]
    cwd: str
    stdout: str
    """Where fd 1 points (`/path/to/log`, `/dev/null`, `pipe:[123]`, ...)."""
    stderr: str
    same_user: bool
    """Whether it runs as the SSH user (only then can specdash read its fds and signal it)."""
    members: tuple[str, ...] = ()
    """Its process group's live members ("PID ARGS")."""
    started_raw: str = ""
    """The start time exactly as the host printed it (the adopt script compares it)."""


@dataclass(frozen=True)
class Adoptable:
    """What specdash would adopt, and why it cannot when it cannot."""

    found: Found
    engine: str
    """`sglang`, `vllm`, or '' when the command line is neither."""
    mode: str
    """The configured mode it matches, or `adopted-PID` for an unmanaged one."""
    matched: bool
    """True when it matches a configured mode."""
    flags: Mapping[str, str] = field(default_factory=dict)
    """Its command-line flags (name without dashes -> value, '' for a switch)."""
    port: int | None = None
    log_path: str = ""
    log_source: str = ""
    """`stdout`, `stderr`, `--log-file` (the argument), or `given`."""
    problems: tuple[str, ...] = ()
    """Why it cannot be adopted (empty: it can)."""

    @property
    def ok(self) -> bool:
        """Whether it can be adopted."""
        return not self.problems

    def describe(self) -> str:
        """What was found, for the confirmation and the CLI."""
        f = self.found
        mode = f"mode {self.mode}" if self.matched else f"unmanaged mode {self.mode} (matches no configured mode)"
        lines = [
            f"pid {f.pid} (process group {f.pgid}): {escape_controls(shlex.join(f.argv))}",
            f"engine {self.engine or 'unknown'} · {mode} · port {self.port if self.port is not None else '?'}",
            f"log: {self.log_path} (from {self.log_source})" if self.log_path else "log: not found",
        ]
        if not self.matched and self.flags:
            lines.append("flags: " + " ".join(f"--{k}" + (f" {v}" if v else "") for k, v in self.flags.items()))
        lines += [f"cannot adopt: {p}" for p in self.problems]
        return "\n".join(lines)


def engine_of(argv: Sequence[str]) -> str:
    """`sglang` / `vllm` from a command line, '' when it is neither (the simulator counts as SGLang)."""
    words = [posixpath.basename(a) for a in argv]
    for i, word in enumerate(words):
        following = words[i + 1] if i + 1 < len(words) else ""
        if word.startswith("sglang.launch_server") or (word == "sglang" and following in ("serve", "launch_server")):
            return "sglang"
        if word == "specdash" and following == "sim" or word == "specdash.sim":
            return "sglang"
        if word.startswith("vllm.entrypoints") or (word == "vllm" and following == "serve"):
            return "vllm"
    return ""


def flags_of(argv: Sequence[str]) -> dict[str, str]:
    """Flags from a command line: `--k v`, `--k=v`, `--switch`; `vllm serve MODEL` gives `model-path`.

    Names lose their dashes, `_` becomes `-`, and the aliases in `_ALIASES` are merged.
    """
    out: dict[str, str] = {}
    words = list(argv)
    for i, word in enumerate(words[:-1]):
        if posixpath.basename(word) == "vllm" and words[i + 1] == "serve" and i + 2 < len(words):
            if not words[i + 2].startswith("-"):
                out["model-path"] = words[i + 2]
            break
    i = next((n for n, w in enumerate(words) if w.startswith("--")), len(words))
    while i < len(words):
        word = words[i]
        if not word.startswith("--"):
            i += 1
            continue
        name, eq, value = word[2:].partition("=")
        if not eq and i + 1 < len(words) and not words[i + 1].startswith("--"):
            value, i = words[i + 1], i + 1
        name = name.replace("_", "-")
        out[_ALIASES.get(name, name)] = value
        i += 1
    return out


def match_mode(argv: Sequence[str], engine: str, config: Config, host_config: HostConfig) -> str:
    """The configured mode whose launch command has exactly these flags (same engine), or ''."""
    flags = flags_of(argv)
    for mode in config.modes.values():
        if mode.engine == engine and flags_of(launch_argv(mode, host_config)) == flags:
            return mode.name
    return ""


def find_log(found: Found, flags: Mapping[str, str], given: str = "") -> tuple[str, str]:
    """(path, where it came from): a given path, else the file behind stdout, stderr, or a log argument."""
    if given:
        return _absolute(given, found.cwd), "given"
    for target, source in ((found.stdout, "stdout"), (found.stderr, "stderr")):
        if target.startswith("/") and not target.startswith(("/dev/", "/proc/")) and not target.endswith("(deleted)"):
            return target, source
    for name in LOG_FLAGS:
        if flags.get(name):
            return _absolute(flags[name], found.cwd), f"--{name}"
    return "", ""


def assess(found: Found, config: Config, host_config: HostConfig, log: str = "") -> Adoptable:
    """What `found` is and whether it can be adopted (see the module docstring)."""
    engine = engine_of(found.argv)
    flags = flags_of(found.argv)
    matched = match_mode(found.argv, engine, config, host_config) if engine else ""
    port_text = flags.get("port", "")
    port = int(port_text) if port_text.isdigit() else DEFAULT_PORTS.get(engine)
    log_path, source = find_log(found, flags, log)
    problems: list[str] = []
    if not found.same_user:
        problems.append(f"pid {found.pid} runs as another user than the SSH user")
    if not engine:
        problems.append("its command line is neither SGLang (sglang.launch_server) nor vLLM (vllm serve)")
    if found.pgid != found.pid:
        others = "; ".join(m for m in found.members if m.split()[0] != str(found.pid))[:300]
        problems.append(
            f"pid {found.pid} does not lead its process group {found.pgid} (the group also holds: {others}); "
            "specdash stops a server by its group, so start it with setsid (or nohup ... & from an "
            "interactive shell)"
        )
    if not log_path:
        problems.append(
            f"its output goes to {found.stdout or '?'}, not a file, and no log argument names one; "
            "give the log's path (--log PATH)"
        )
    return Adoptable(
        found,
        engine,
        matched or f"adopted-{found.pid}",
        bool(matched),
        flags,
        port,
        log_path,
        source,
        tuple(problems),
    )


async def inspect(host: Host, host_config: HostConfig, *, pid: int | None = None, port: int | None = None) -> Found:
    """Describe the process `pid`, or the one listening on `port`; raises `SpecdashError` when there is none."""
    what, value = ("pid", pid) if pid is not None else ("port", port)
    if value is None:
        raise SpecdashError("say which server to adopt: a PID or a port")
    result = await run_script(host, "inspect.sh", what, str(value), state_dir=host_config.state_dir)
    lines = result.lines
    fields = {word: rest for word, rest in lines}
    where = f"on {host_config.name}"
    if "noport" in fields:
        raise SpecdashError(f"nothing listens on port {value} {where}")
    if "hidden" in fields:
        raise SpecdashError(
            f"port {value} {where} is in use by a process the SSH user cannot see: {escape_controls(fields['hidden'])}"
        )
    if "gone" in fields or "pid" not in fields:
        raise SpecdashError(f"no process {value} {where}" if what == "pid" else f"cannot inspect port {value} {where}")
    _state, pgid, sid = (fields["stat"].split() + ["0", "0", "0"])[:3]
    uid, _, own = fields.get("uid", "").partition(" ")
    argv = tuple(a for a in base64.b64decode(fields.get("argv", "")).decode("utf-8", "replace").split("\0") if a)
    return Found(
        pid=int(fields["pid"]),
        pgid=int(pgid),
        sid=int(sid),
        started_at=float(fields.get("started") or 0),
        argv=argv,
        cwd=fields.get("cwd", ""),  # argv, cwd, stdout, stderr: kept raw, they find the log file
        stdout=fields.get("fd1", ""),
        stderr=fields.get("fd2", ""),
        same_user=bool(uid) and uid == own.strip(),
        members=tuple(escape_controls(" ".join(rest.split())) for word, rest in lines if word == "member"),
        started_raw=fields.get("started", ""),
    )


async def adopt(host: Host, host_config: HostConfig, target: Adoptable) -> RunRecord:
    """Write the run record for `target` on the host and return it (refused while a run of ours is live)."""
    if not target.ok:
        raise SpecdashError("; ".join(target.problems))
    f = target.found
    run_id = time.strftime("%Y%m%d-%H%M%S") + "-adopted-" + uuid.uuid4().hex[:6]
    meta = json.dumps(
        {
            "mode": target.mode,
            "engine": target.engine,
            "port": target.port,
            "command": list(f.argv),
            "adopted": True,
            "log": target.log_path,
        }
    )
    result = await run_script(
        host,
        "adopt.sh",
        run_id,
        str(f.pid),
        str(f.pgid),
        f.started_raw,
        meta,
        target.log_path,
        state_dir=host_config.state_dir,
    )
    word, rest = (result.lines or [("", "")])[-1]
    if result.exit_status == 10 and word == "live":
        other, other_pid = (rest.split() + ["", "0"])[:2]
        raise ServerAlreadyRunning(host_config.name, other, int(other_pid))
    if result.exit_status == 14:
        raise SpecdashError(f"pid {f.pid} on {host_config.name} is gone (or its PID now belongs to another process)")
    if result.exit_status == 15:
        raise SpecdashError(f"the log {target.log_path!r} is not a file on {host_config.name}")
    if not result.ok or word != "adopted":
        raise SpecdashError(
            f"adopting pid {f.pid} on {host_config.name} failed: {(result.stderr or result.stdout).strip()}"
        )
    record = await Lifecycle(host, host_config).current(run_id)
    if record is None:
        raise SpecdashError(f"run {run_id} vanished right after the adoption on {host_config.name}")
    return record


def _absolute(path: str, cwd: str) -> str:
    if path.startswith("~/") or posixpath.isabs(path):
        return path
    return posixpath.normpath(posixpath.join(cwd or "/", path))
