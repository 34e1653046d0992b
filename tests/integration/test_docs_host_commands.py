"""The docs stay true, second half: every command README.md and docs/*.md show for a host runs, page by page
in the order the page shows it, against the simulator behind the test sshd (the first half, the parser and
the offline commands, is `tests/unit/test_docs.py`).

The config names the hosts the pages use (`gpu`, `workstation`) after the test sshd, each with a state dir
of its own, and the modes they use (`baseline`, `eagle3`: SGLang; `plain`, `ngram`: vLLM's wording) after the
simulator; `demo` is the embedded host. A command runs as the user types it (`python -m specdash ...`, exit
0, no traceback), with two changes said here:

- The port the pages show (30000) is the test's free port, which the baseline mode serves on.
- A sweep or a tune as shown measures minutes of traffic (`--levels 1-64x2`, 30 s per level, two
  repeats). `bench` and `tune` get options appended that bound the work and change no meaning: the first
  levels, two requests of 8 tokens each, one repeat. What the command shows it keeps (modes, space, SLO,
  `--repeats 3`, `--json`, `--resume`), and the parser takes the last of a repeated option.

The dashboard's commands (`connect`, `demo`) run in tmux: the first screen, then `q`. `logs -f` follows until
its first lines, then Ctrl-C. `adopt` needs a server started by hand: the test starts the baseline's command
with `setsid nohup` on the host first, as the page describes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import shlex
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from specdash import config
from specdash.engines.registry import names
from specdash.remote.ssh import SSHHost, SSHOptions
from tests.integration.conftest import target
from tests.support.doc_commands import DOCS, OFFLINE, ROOT, DocCommand, doc_commands
from tests.support.eventually import eventually_sync
from tests.support.ports import free_port
from tests.support.remote_sim import by_hand_command, sim_config
from tests.support.sshd import Keys, Sshd
from tests.support.tmux import TmuxSession

DOC_PORT = "30000"
"""The port the pages show; the test's baseline serves on a free one instead."""

BOUNDS = {
    "bench": ["--max-concurrency", "2", "--requests-per-level", "2", "--output-len", "8"],
    "tune": ["--levels", "1,2", "--repeats", "1", "--requests-per-level", "2", "--output-len", "8"],
}
"""Appended to the pages' sweeps and tunes: the work bounded, the meaning kept."""

PACE = 0.002
"""The simulated startups' pace (a tune restarts the server once per setting): `up gpu --mode eagle3 --wait` took
2.5 s on the dev VM, connection included."""

DEADLINE_S = 300.0
"""One command's limit (a tune restarts the server once per setting)."""

HOST_COMMANDS = [c for c in doc_commands() if c.fenced and c.argv[0] not in OFFLINE and c.argv[0] != "sim"]
PAGES = sorted({c.where.split(":")[0] for c in HOST_COMMANDS})


def vllm_modes(port: int) -> str:
    """`plain` and `ngram`, the workstation example's modes, on the simulator's vLLM wording."""
    base = f'"--sim-log-style", "vllm-0.24", "--tp", "1", "--sim-time-scale", "{PACE}", "--sim-seed", "1"'
    ngram = json.dumps(json.dumps({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}))
    return f"""
[modes.plain]
extends = "baseline"
engine = "vllm"
port = {port}
args = [{base}]

[modes.ngram]
extends = "plain"
args = ["--speculative-config", {ngram}]
"""


class Docs:
    """The sandbox the pages' commands run in: a config, a data dir, the hosts' state dirs."""

    def __init__(self, tmp: Path, sshd: Sshd, keys: Keys, known_hosts: Path, options: SSHOptions) -> None:
        self.tmp = tmp
        self.port = free_port()
        cfg = sim_config(tmp, port=self.port, time_scale=PACE, tp=1, extra_modes=vllm_modes(free_port()))
        assert cfg.path is not None
        self.state = {name: f"~/.specdash-tests/{uuid.uuid4().hex}" for name in ("gpu", "workstation")}
        hosts = "".join(
            f'\n[hosts.{name}]\naddress = "{target(sshd)}"\nidentity_file = "{keys.client_key}"\n'
            f'known_hosts = "{known_hosts}"\nstate_dir = "{state}"\n'
            for name, state in self.state.items()
        )
        tunes = '\n[tune.eagle3]\nmode = "eagle3"\nspace = "steps=1,3 topk=1 draft=2"\n'
        cfg.path.write_text(cfg.path.read_text() + hosts + tunes)
        self.config = config.load(cfg.path, engines=names())
        home = tmp / "home"
        self.env = {
            **os.environ,
            "SPECDASH_CONFIG": str(cfg.path),
            "XDG_DATA_HOME": str(home / "data"),
            "XDG_STATE_HOME": str(home / "state"),
            "COLUMNS": "120",
        }
        self.sshd, self.options = sshd, options
        self.by_hand: int | None = None

    def argv(self, cmd: DocCommand) -> list[str]:
        argv = [str(self.port) if a == DOC_PORT else a.replace(f":{DOC_PORT}", f":{self.port}") for a in cmd.argv]
        extra = list(BOUNDS.get(argv[0], []))
        if argv[0] == "tune" and argv[1] == "demo":
            extra += ["--time-scale", str(PACE)]
        return [*argv, *extra]

    def run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "specdash", *argv]
        return subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=DEADLINE_S, cwd=self.tmp)

    async def _ssh(self, command: str) -> str:
        async with SSHHost(target(self.sshd), self.options) as host:
            return (await host.run(command)).stdout

    def start_by_hand(self) -> None:
        """The baseline's command, started on the host by hand (`setsid nohup ... &`), not by specdash."""
        command = by_hand_command(self.config.mode("baseline"), self.config.hosts["gpu"], f"hand-{self.port}.log")
        self.by_hand = int(asyncio.run(self._ssh(command)).split()[-1])
        listening = f"ss -Hltn 'sport = :{self.port}'"
        eventually_sync(lambda: asyncio.run(self._ssh(listening)).strip(), timeout=60, what="the hand-started server")

    def cleanup(self) -> None:
        for host in self.state:
            self.run(["down", host, "--yes", "--grace", "5"])
        kill = f"kill -KILL -- -{self.by_hand} 2>/dev/null; " if self.by_hand else ""
        asyncio.run(self._ssh(f"{kill}rm -f ~/hand-{self.port}.log; rm -rf {' '.join(self.state.values())}"))


@pytest.fixture
def docs(tmp_path: Path, sshd: Sshd, ssh_keys: Keys, known_hosts: Path, ssh_options: SSHOptions) -> Iterator[Docs]:
    sandbox = Docs(tmp_path, sshd, ssh_keys, known_hosts, ssh_options)
    yield sandbox
    sandbox.cleanup()


def in_terminal(docs: Docs, argv: list[str], first_screen: str) -> int:
    """Run a dashboard command in tmux until `first_screen` shows, quit it with `q` (and `y` if asked), and
    return its exit status."""
    rc = docs.tmp / f"rc-{uuid.uuid4().hex[:6]}"
    line = f"{shlex.join([sys.executable, '-m', 'specdash', *argv])}; echo $? > {rc}"
    env = {k: docs.env[k] for k in ("SPECDASH_CONFIG", "XDG_DATA_HOME", "XDG_STATE_HOME")}
    term = TmuxSession(["sh", "-c", line], width=120, height=36, env=env)
    try:
        term.wait_for(first_screen, timeout=60)

        def quit_it() -> bool:
            screen = term.screen()
            if not term.alive():
                return True
            with contextlib.suppress(subprocess.CalledProcessError):  # it may end between the two calls
                term.send("y" if "Quit specdash?" in screen else "q")
            return False

        eventually_sync(quit_it, timeout=60, what=f"specdash {shlex.join(argv)} ends on q")
    finally:
        (docs.tmp / "last_screen.txt").write_text(term.screen())
        term.kill()
    return int(rc.read_text())


CTRL_C_REACHES = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"
)
WITH_CTRL_C = [sys.executable, "-c", CTRL_C_REACHES]
"""Runs a command with SIGINT's default disposition, as a user's terminal gives it: a job started with `&`
without job control ignores SIGINT (POSIX), its children inherit that, and Python then installs no
KeyboardInterrupt (ci45's clean clone ran under such a job: `logs -f` ignored the test's Ctrl-C)."""


def follow(docs: Docs, argv: list[str]) -> tuple[int, str]:
    """`logs -f`: read until it printed lines, then Ctrl-C; (exit status, what it printed)."""
    proc = subprocess.Popen(
        [*WITH_CTRL_C, sys.executable, "-m", "specdash", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=docs.env,
        cwd=docs.tmp,
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        readable, _, _ = select.select([proc.stdout], [], [], 60.0)  # a silent follower must fail, not hang
        first = proc.stdout.readline() if readable else ""
        assert first, f"logs -f printed no line in 60 s (exit status {proc.poll()})"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "Traceback" not in err, err
    return proc.returncode, first + out


def modes_named(argv: list[str]) -> list[str]:
    """The modes a `bench` or `tune` command names (`--mode`/`--modes A,B`), the last option winning."""
    named = [
        argv[i + 1] for i, a in enumerate(argv[:-1]) if argv[0] in ("bench", "tune") and a in ("--mode", "--modes")
    ]
    return named[-1].split(",") if named else []


FIRST_SCREEN = {"connect": "STOPPED", "demo": "Autoplay"}
"""What each dashboard command shows once it is up."""


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (make test installs it)")
@pytest.mark.parametrize("page", PAGES)
def test_every_host_command_a_page_shows_runs_in_its_order(page: str, docs: Docs) -> None:
    commands = [c for c in HOST_COMMANDS if c.where.startswith(f"{page}:")]
    assert commands
    for cmd in commands:
        argv = docs.argv(cmd)
        shown = f"{cmd.where}: specdash {shlex.join(argv)}"
        if argv[0] in FIRST_SCREEN:
            assert in_terminal(docs, argv, FIRST_SCREEN[argv[0]]) == 0, shown
            continue
        if argv[0] == "logs" and "-f" in argv:
            code, out = follow(docs, argv)
            assert code == 130 and out.strip(), f"{shown}: exit {code} (a shell expects 130), printed {out!r}"
            continue
        if argv[0] == "adopt" and docs.by_hand is None:
            docs.start_by_hand()
        done = docs.run(argv)
        assert done.returncode == 0, f"{shown}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        assert "Traceback" not in done.stderr, f"{shown}\n{done.stderr[-3000:]}"
        assert done.stdout.strip(), f"{shown}: printed nothing"
        for mode in modes_named(argv):  # a sweep or a tune reports on every mode it was given
            assert mode in done.stdout, f"{shown}: nothing about {mode!r} in\n{done.stdout[-3000:]}"


def test_the_pages_show_host_commands_of_every_kind() -> None:
    """The extraction: what the runs above cover (else they test little)."""
    kinds = {c.argv[0] for c in HOST_COMMANDS}
    assert kinds >= {"connect", "up", "status", "logs", "switch", "bench", "down", "adopt", "tune", "demo"}, kinds
    assert {f"{p.relative_to(ROOT)}" for p in DOCS} >= set(PAGES)
