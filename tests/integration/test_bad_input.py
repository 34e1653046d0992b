"""Bad input, table-driven, through the real CLI (`python -m specdash ...` in a subprocess).

Every case must give one clear error line that names the input, exit 2 (usage) or 1 (runtime), and show
no traceback; `--debug` shows the traceback. The SSH cases need a real sshd (root) and skip otherwise.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.ports import free_port
from tests.support.sshd import TEST_USER, Keys, Sshd, keygen

GOOD = """
[hosts.box]
address = "u@127.0.0.1:1"

[modes.base]
engine = "sglang"
model = "/models/m"
port = 30000
"""
MODE = '[modes.m]\nengine = "sglang"\nmodel = "/m"\n'


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    code: int
    needles: tuple[str, ...]
    config: str = GOOD


def cfg_case(case_id: str, text: str, *needles: str) -> Case:
    """A config that `config check` must refuse with exit 2, naming the file and the key."""
    return Case(case_id, ("config", "check"), 2, ("config.toml", *needles), text)


CASES = [
    # -- config: syntax, unknown keys, wrong types, extends, empty values, missing model ----------------
    cfg_case("toml-syntax", "[modes.a\nengine = 1", "TOML syntax error", "line 1"),
    cfg_case("not-utf8", "\udcff", "cannot read config"),
    cfg_case("unknown-top-key", "colour = 1", "unknown top-level key 'colour'"),
    cfg_case("unknown-mode-key", MODE + "bogus = 1", "[modes.m] bogus: unknown key"),
    cfg_case("unknown-host-key", '[hosts.h]\naddress = "h"\nuser = "x"', "[hosts.h] user: unknown key"),
    cfg_case("port-string", MODE + 'port = "8000"', "[modes.m] port: must be a number"),
    cfg_case("port-float", MODE + "port = 8000.5", "[modes.m] port: must be a whole number"),
    cfg_case("port-zero", MODE + "port = 0", "[modes.m] port: 0 is out of range"),
    cfg_case("port-huge", MODE + "port = 70000", "[modes.m] port: 70000 is out of range"),
    cfg_case("port-bool", MODE + "port = true", "[modes.m] port: must be a number, not a boolean"),
    cfg_case("args-string", MODE + 'args = "--tp 8"', "[modes.m] args: must be a list of strings"),
    cfg_case("args-empty-item", MODE + 'args = ["--tp", ""]', "[modes.m] args: contains an empty argument"),
    cfg_case("env-int", MODE + "env = { X = 1 }", "[modes.m] env.X: must be a string"),
    cfg_case("stop-timeout-negative", MODE + "stop_timeout = -1", "[modes.m] stop_timeout: -1 is out of range"),
    cfg_case("engine-unknown", '[modes.m]\nengine = "tgi"\nmodel = "/m"', "[modes.m] engine: 'tgi' is not one of"),
    cfg_case("extends-missing", '[modes.a]\nextends = "nope"', "[modes.a] extends: no mode named 'nope'"),
    cfg_case("extends-cycle", '[modes.a]\nextends = "b"\n[modes.b]\nextends = "a"', "cycle a -> b -> a"),
    cfg_case("extends-self", '[modes.a]\nextends = "a"', "cycle a -> a"),
    cfg_case("model-missing", '[modes.m]\nengine = "sglang"', "[modes.m] model: missing (required)"),
    cfg_case("model-blank", '[modes.m]\nengine = "sglang"\nmodel = "  "', "[modes.m] model: must not be empty"),
    cfg_case("hosts-not-table", "hosts = 3", "[hosts] must be a table of tables"),
    cfg_case("mode-not-table", "[modes]\na = 1", "[modes.a] must be a table"),
    cfg_case("host-address-empty", '[hosts.h]\naddress = ""', "[hosts.h] address: must not be empty"),
    cfg_case("host-address-bad", '[hosts.h]\naddress = "u@"', "[hosts.h] address: bad host 'u@'"),
    cfg_case("keymap-int", "[keymap]\nquit = 1", "[keymap] quit: must be a string of keys"),
    cfg_case(
        "bench-policy",
        '[bench]\non_link_loss = "retry"',
        "[bench] on_link_loss: must be one of pause, stop, not 'retry'",
    ),
    cfg_case("bench-link-wait", "[bench]\nlink_wait = 0", "[bench] link_wait: 0 is out of range"),
    cfg_case("bench-unknown", "[bench]\nlevels = [1]", "[bench] levels: unknown key"),
    cfg_case("bench-probe", '[bench]\nprobe = "gpu"', "[bench] probe: must be one of host, local, not 'gpu'"),
    cfg_case("bench-greedy-range", "[bench]\ngreedy_prompts = 1001", "[bench] greedy_prompts: 1001 is out of range"),
    cfg_case(
        "bench-greedy-fraction",
        "[bench]\ngreedy_prompts = 2.5",
        "[bench] greedy_prompts: must be a whole number of prompts, not 2.5",
    ),
    # -- CLI: empty args, host strings, ports, modes, levels, URLs -------------------------------------
    Case("no-command", (), 2, ("usage: specdash",)),
    Case("up-no-host", ("up",), 2, ("the following arguments are required: HOST",)),
    Case("switch-no-mode", ("switch", "box"), 2, ("the following arguments are required: MODE",)),
    Case("unknown-flag", ("status", "box", "--bogus"), 2, ("unrecognized arguments: --bogus",)),
    Case("host-user-only", ("up", "user@", "--mode", "base"), 2, ("bad host 'user@'",)),
    Case("host-no-user", ("up", "@host", "--mode", "base"), 2, ("bad host '@host'",)),
    Case("host-port-range", ("up", "host:99999", "--mode", "base"), 2, ("bad host 'host:99999'", "port '99999'")),
    Case("host-port-text", ("up", "host:abc", "--mode", "base"), 2, ("bad host 'host:abc'", "port 'abc'")),
    Case("host-empty", ("status", ""), 2, ("bad host ''",)),
    Case("jump-bad", ("status", "box", "-J", "j:0"), 2, ("'j:0'",)),
    Case("mode-unknown", ("up", "box", "--mode", "nosuch"), 2, ("unknown mode 'nosuch'", "known modes: base")),
    Case("levels-zero", ("bench", "box", "--levels", "0"), 2, ("between 1 and 1024, got 0",)),
    Case("levels-huge", ("bench", "box", "--levels", "2000"), 2, ("between 1 and 1024, got 2000",)),
    Case("levels-text", ("bench", "box", "--levels", "a,b"), 2, ("--levels", "'a'", "1-64x2")),
    Case("levels-range-backwards", ("bench", "box", "--levels", "64-1x2"), 2, ("--levels", "'64-1x2'", "below")),
    Case("levels-empty", ("bench", "box", "--levels", ","), 2, ("no concurrency levels",)),
    Case("link-wait-zero", ("bench", "box", "--link-wait", "0"), 2, ("argument --link-wait: must be more than 0",)),
    Case(
        "repeats-zero",
        ("bench", "box", "--repeats", "0"),
        2,
        ("argument --repeats: must be between 1 and 20, got '0'",),
    ),
    Case("link-policy", ("bench", "box", "--on-link-loss", "retry"), 2, ("--on-link-loss", "'retry'")),
    Case(
        "output-len-zero", ("bench", "box", "--output-len", "0"), 2, ("argument --output-len: must be between 1 and",)
    ),
    Case("url-port", ("bench", "--url", "http://127.0.0.1:99999"), 2, ("bad URL 'http://127.0.0.1:99999'",)),
    Case("url-scheme", ("bench", "--url", "ftp://x"), 2, ("bad URL 'ftp://x'",)),
    Case("url-and-host", ("bench", "box", "--url", "http://127.0.0.1:1"), 2, ("either HOST", "not both")),
    Case("logs-negative", ("logs", "box", "-n", "-5"), 2, ("-n/--lines", "between 0 and")),
    Case(
        "config-flag-missing",
        ("status", "box", "--config", "/nonexistent/c.toml"),
        2,
        ("--config /nonexistent/c.toml",),
    ),
    # -- SSH without a server: DNS failure, unreachable ------------------------------------------------
    Case("dns-failure", ("status", "nosuchhost.invalid"), 1, ("nosuchhost.invalid",)),
    Case("unreachable", ("status", "box"), 1, ("127.0.0.1:1", "refused")),
]


def run_cli(argv: tuple[str, ...], config: Path, home: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The real CLI, isolated: its own config, HOME (no ~/.ssh/config, no agent) and XDG directories."""
    env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"}
    env.update(SPECDASH_CONFIG=str(config), HOME=str(home))
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        env[var] = str(home / var.lower())
    return subprocess.run(
        [sys.executable, "-m", "specdash", *argv], capture_output=True, text=True, env=env, timeout=timeout
    )


def write_config(directory: Path, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "config.toml"
    if "\udcff" in text:
        path.write_bytes(b"\xff\xfe[modes]\n")  # not UTF-8
    else:
        path.write_text(text)
    return path


def check_one_clear_line(done: subprocess.CompletedProcess[str], code: int, needles: tuple[str, ...]) -> None:
    both = done.stdout + done.stderr
    assert done.returncode == code, (done.returncode, done.stderr)
    assert "Traceback" not in both, done.stderr
    if needles[0].startswith("usage:"):  # bare `specdash`: the help, not an error
        assert needles[0] in done.stdout
        return
    errors = [line for line in done.stderr.splitlines() if line.startswith("specdash") and "error" in line]
    assert len(errors) == 1, done.stderr
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    """Every case run once, a few at a time (each is a fresh interpreter: mostly start-up cost)."""
    base = tmp_path_factory.mktemp("bad-input")

    def one(case: Case) -> subprocess.CompletedProcess[str]:
        directory = base / case.id
        return run_cli(case.argv, write_config(directory, case.config), directory)

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip([c.id for c in CASES], pool.map(one, CASES), strict=True))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_gives_one_clear_line(case: Case, outcomes: dict[str, subprocess.CompletedProcess[str]]) -> None:
    check_one_clear_line(outcomes[case.id], case.code, case.needles)


@pytest.mark.parametrize("case_id", ["extends-cycle", "host-port-range", "unreachable"])
def test_debug_shows_the_traceback(case_id: str, tmp_path: Path) -> None:
    case = next(c for c in CASES if c.id == case_id)
    done = run_cli(("--debug", *case.argv), write_config(tmp_path, case.config), tmp_path)
    assert done.returncode == case.code
    assert "Traceback (most recent call last)" in done.stderr
    assert case.needles[-1] in done.stderr


# -- SSH against a real server: unknown and changed host key, wrong key, jump host down ----------------


def _host_config(server: Sshd, keys: Keys, known_hosts: Path, *, key: Path | None = None, jump: str = "") -> str:
    lines = [
        "[hosts.real]",
        f'address = "{TEST_USER}@127.0.0.1:{server.port}"',
        f'identity_file = "{key or keys.client_key}"',
        f'known_hosts = "{known_hosts}"',
    ]
    if jump:
        lines.append(f'jump = "{jump}"')
    return GOOD + "\n".join(lines) + "\n"


SSH_CASES = ["unknown-host-key", "changed-host-key", "wrong-key", "jump-down"]


@pytest.mark.parametrize("case_id", SSH_CASES)
def test_ssh_failures_give_one_clear_line(
    case_id: str,
    sshd: Sshd,  # noqa: F811
    ssh_keys: Keys,  # noqa: F811
    tmp_path: Path,
) -> None:
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(sshd.known_hosts_line() + "\n")
    key: Path | None = None
    jump = ""
    if case_id == "unknown-host-key":
        known_hosts.write_text("")
        needles: tuple[str, ...] = ("host key", "unknown", str(known_hosts))
    elif case_id == "changed-host-key":
        impostor = " ".join(keygen(tmp_path / "impostor", "impostor").split()[:2])
        known_hosts.write_text(f"[127.0.0.1]:{sshd.port} {impostor}\n")
        needles = ("man-in-the-middle", f"{known_hosts}:1")
    elif case_id == "wrong-key":
        key = ssh_keys.other_key
        needles = (str(ssh_keys.other_key), f"{TEST_USER}@127.0.0.1:{sshd.port}")
    else:
        jump = f"{TEST_USER}@127.0.0.1:{free_port()}"
        needles = (f"jump host {jump}",)
    before = known_hosts.read_text()
    config = write_config(tmp_path, _host_config(sshd, ssh_keys, known_hosts, key=key, jump=jump))
    done = run_cli(("status", "real"), config, tmp_path)
    check_one_clear_line(done, 1, needles)
    assert known_hosts.read_text() == before  # never rewritten behind the user's back
