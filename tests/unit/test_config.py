"""Config parsing: the shipped example is valid, extends resolves, and every bad input names file, table, key."""

from __future__ import annotations

from pathlib import Path

import pytest

from specdash import config
from specdash.cli.config import example_text
from specdash.engines.registry import names
from specdash.errors import UsageError
from specdash.phases import Phase
from tests.support.cli import cli

P = Path("/cfg/config.toml")
ENGINES = names()

BASE = """
[modes.base]
engine = "sglang"
model = "/m"
args = ["--tp", "8"]
env = { A = "1" }
"""


def test_example_config_is_valid() -> None:
    cfg = config.parse(example_text(), P, engines=ENGINES)
    eagle = cfg.mode("eagle3")
    assert eagle.engine == "sglang"
    assert eagle.args[:3] == ("--tp", "8", "--enable-metrics")
    assert "EAGLE3" in eagle.args
    assert cfg.mode("eagle3-v2").env["SGLANG_ENABLE_SPEC_V2"] == "1"
    assert cfg.mode("vllm-ngram").port == 8000
    assert cfg.hosts["gpu"].env["no_proxy"] == "127.0.0.1,localhost"


def test_extends_appends_args_and_merges_env() -> None:
    cfg = config.parse(
        BASE + '[modes.child]\nextends = "base"\nargs = ["--x"]\nenv = { B = "2" }\nport = 31000\n', P, engines=ENGINES
    )
    child = cfg.mode("child")
    assert child.args == ("--tp", "8", "--x")
    assert dict(child.env) == {"A": "1", "B": "2"}
    assert (child.engine, child.model, child.port) == ("sglang", "/m", 31000)


def test_shell_metacharacters_stay_literal() -> None:
    cfg = config.parse(
        BASE + '[modes.evil]\nextends = "base"\nargs = ["--x", "a; rm -rf /", "$(id)"]\n', P, engines=ENGINES
    )
    assert cfg.mode("evil").args[-2:] == ("a; rm -rf /", "$(id)")


def test_missing_file_is_empty_config(tmp_path: Path) -> None:
    cfg = config.load(tmp_path / "none.toml", engines=ENGINES)
    assert not cfg.hosts and not cfg.modes


BAD = [
    ("syntax", "[modes.x\n", "TOML syntax error"),
    ("top-level key", "colour = 1\n", "unknown top-level key 'colour'"),
    ("mode key", BASE + "argz = []\n", "[modes.base] argz: unknown key"),
    ("engine", '[modes.m]\nengine = "tgi"\nmodel = "/m"\n', "[modes.m] engine: 'tgi' is not one of sglang, vllm"),
    ("missing engine", '[modes.m]\nmodel = "/m"\n', "[modes.m] engine: missing"),
    ("missing model", '[modes.m]\nengine = "sglang"\n', "[modes.m] model: missing"),
    ("empty model", '[modes.m]\nengine = "sglang"\nmodel = " "\n', "[modes.m] model: must not be empty"),
    ("args string", BASE + '[modes.c]\nextends = "base"\nargs = "--tp 8"\n', "[modes.c] args: must be a list"),
    ("args ints", BASE + '[modes.c]\nextends = "base"\nargs = [8]\n', "[modes.c] args: must be a list of strings"),
    ("empty arg", BASE + '[modes.c]\nextends = "base"\nargs = [""]\n', "[modes.c] args: contains an empty argument"),
    ("port type", BASE + '[modes.c]\nextends = "base"\nport = "x"\n', "[modes.c] port: must be a number"),
    ("port range", BASE + '[modes.c]\nextends = "base"\nport = 70000\n', "[modes.c] port: 70000 is out of range"),
    ("extends missing", '[modes.c]\nextends = "nope"\n', "[modes.c] extends: no mode named 'nope'"),
    ("cycle", '[modes.a]\nextends = "b"\n[modes.b]\nextends = "a"\n', "extends: cycle a -> b -> a"),
    ("self cycle", '[modes.a]\nextends = "a"\n', "extends: cycle a -> a"),
    ("env type", BASE + '[modes.c]\nextends = "base"\nenv = { X = 1 }\n', "[modes.c] env.X: must be a string"),
    ("host address", "[hosts.h]\njump = 'j'\n", "[hosts.h] address: missing"),
    ("host key", "[hosts.h]\naddress = 'a'\nuser = 'root'\n", "[hosts.h] user: unknown key"),
    ("hosts not table", "hosts = 3\n", "[hosts] must be a table of tables"),
    ("mode not table", "[modes]\nm = 3\n", "[modes.m] must be a table"),
    ("ui bell", "[ui]\nbell = 'yes'\n", "[ui] bell: must be true or false"),
    ("keymap", "[keymap]\nstart = 1\n", "[keymap] start: must be a string of keys"),
    ("stop_timeout", BASE + '[modes.c]\nextends = "base"\nstop_timeout = -1\n', "[modes.c] stop_timeout: -1"),
    ("stuck phase", BASE + "[modes.base.stuck]\ntokenizing = 60\n", "[modes.base.stuck] tokenizing: neither factor"),
    ("stuck factor", BASE + "[modes.base.stuck]\nfactor = 0.5\n", "[modes.base.stuck] factor: 0.5 is out of range"),
    ("stuck type", BASE + '[modes.base.stuck]\nwarming_up = "1m"\n', "[modes.base.stuck] warming_up: must be a number"),
    ("stuck table", BASE + "[modes.c]\nextends = 'base'\nstuck = 3\n", "[modes.c.stuck] must be a table"),
]


@pytest.mark.parametrize(("case", "text", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_config_names_file_table_and_key(case: str, text: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        config.parse(text, P, engines=ENGINES)
    assert str(P) in info.value.message
    assert message in info.value.message
    assert info.value.exit_code == 2


def test_stuck_rules_per_mode_are_inherited_and_overridden() -> None:
    text = BASE.replace("[modes.base]", '[modes.base]\nstuck = { factor = 4, "capturing CUDA graphs" = 900 }')
    cfg = config.parse(
        text + '[modes.c]\nextends = "base"\n[modes.c.stuck]\nfloor = 30\ndist-init = 45\ncompiling = 600\n',
        P,
        engines=ENGINES,
    )
    child = cfg.mode("c").stuck
    assert (child.factor, child.floor) == (4.0, 30.0)
    assert dict(child.fixed) == {Phase.CAPTURING_GRAPHS: 900.0, Phase.DIST_INIT: 45.0, Phase.COMPILING: 600.0}
    assert cfg.mode("base").stuck.floor == 120.0


def test_unknown_mode_lists_known_modes() -> None:
    cfg = config.parse(BASE, P, engines=ENGINES)
    with pytest.raises(UsageError, match=r"unknown mode 'eagle' .* \(known modes: base\)"):
        cfg.mode("eagle")


def test_config_check_cli_exits_2_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "c.toml"
    bad.write_text('[modes.m]\nengine = "tgi"\nmodel = "/m"\n')
    out = cli("config", "check", "--config", str(bad))
    assert out.returncode == 2
    assert out.stderr.strip() == f"specdash: error: {bad}: [modes.m] engine: 'tgi' is not one of sglang, vllm"


def test_config_init_then_check(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "config.toml"
    assert cli("config", "init", "--config", str(path)).returncode == 0
    again = cli("config", "init", "--config", str(path))
    assert again.returncode == 2 and "already exists" in again.stderr
    ok = cli("config", "check", "--config", str(path))
    assert ok.returncode == 0 and "7 mode(s)" in ok.stdout


def test_the_commented_simulator_block_is_a_working_config() -> None:
    # `config init` writes it commented out; uncommented it must be valid and launch the simulator.
    from specdash.server.launch import launch_argv

    lines = example_text().splitlines()
    start = lines.index("# [hosts.mybox]")
    end = lines.index("# [keymap]")
    block = "\n".join(line[2:] if line.startswith("# ") else line.lstrip("#") for line in lines[start:end])
    cfg = config.parse(block, P, engines=ENGINES)
    crash = cfg.mode("sim-crash")
    argv = launch_argv(crash, cfg.hosts["mybox"])
    assert argv[:5] == ["specdash-venv/bin/python", "-m", "specdash", "sim", "--model-path"]
    assert "--sim-fault" in argv and "EAGLE3" in argv and "--enable-metrics" in argv
    assert {m.launcher for m in cfg.modes.values()} == {("specdash-venv/bin/python", "-m", "specdash", "sim")}
    from specdash.cli import build_parser

    parsed = build_parser().parse_args(argv[3:])  # what the simulator on the host will parse
    assert parsed.sim_fault == ["crash-at-batch=10"] and parsed.speculative_algorithm == "EAGLE3"
