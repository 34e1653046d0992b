"""The command line's parser: light to build, one definition per option, helpful when a word is misspelt.

Issue 30 point 7 (a light parser: `--help` imports no implementation), issue 29 point 7 (one parser per
option, shared by every command that takes it) and issue 27 point 10 ("did you mean", `--demo` for the
commands that read the store, the missing config's hint).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from specdash.cli import main
from specdash.cli.commands import COMMANDS, build_parser
from specdash.cli.options import PATH_TYPES
from tests.support.results_store import make_store

HEAVY = ("asyncssh", "cryptography", "textual", "httpx", "aiohttp", "matplotlib", "sqlite3", "asyncio")


def _imported_by(argv: list[str], tmp_path: Path) -> set[str]:
    code = (
        "import sys\n"
        "from specdash.cli import main\n"
        f"code = main({argv!r})\n"
        f"print('IMPORTED', *sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))\n"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    line = next(x for x in out.stdout.splitlines() if x.startswith("IMPORTED"))
    return set(line.split()[1:])


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["bench", "--help"], ["tune", "--help"], ["bnech"]])
def test_help_and_version_import_no_implementation(argv: list[str], tmp_path: Path) -> None:
    assert _imported_by(argv, tmp_path) == set()


def test_config_path_imports_no_network_library(tmp_path: Path) -> None:
    assert _imported_by(["config", "path"], tmp_path) & {"asyncssh", "textual", "httpx", "aiohttp"} == set()


def test_runs_imports_no_network_library(tmp_path: Path) -> None:
    assert _imported_by(["runs"], tmp_path) & {"asyncssh", "textual", "httpx", "aiohttp", "asyncio"} == set()


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser(everything=True)
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _options() -> list[tuple[str, argparse.Action]]:
    return [(name, a) for name, p in _subparsers().items() for a in p._actions if a.option_strings]


def test_every_subcommand_is_declared_and_has_an_implementation() -> None:
    import importlib

    subs = _subparsers()
    assert [c.name for c in COMMANDS] == list(subs)
    for command in COMMANDS:
        assert callable(importlib.import_module(f"specdash.cli.{command.name}").run)
        assert any(a.dest != "help" for a in subs[command.name]._actions), command.name


def test_no_option_parses_numbers_with_a_bare_int_or_float() -> None:
    """Every numeric flag of every subcommand goes through a bounded parser (specdash.limits)."""
    bare = [
        f"{cmd} {'/'.join(a.option_strings)}"
        for cmd, p in _subparsers().items()
        for a in p._actions
        if a.type in (int, float)
    ]
    assert bare == []


DIFFERENT = {
    "--help": "argparse's",
    "--mode": "one mode, or bench's comma-separated list",
    "--log": "adopt's is a path on the host (text), advise's a local file",
}
"""Options whose name means different things in different commands (so their values are read differently)."""


def test_an_option_taken_by_several_commands_is_judged_the_same_way_by_each() -> None:
    """tune took `--duration nan` that bench refused: one option name, one type, one set of choices."""
    seen: dict[str, tuple[str, object, object]] = {}
    shared = 0
    for cmd, action in _options():
        for flag in (f for f in action.option_strings if f.startswith("--") and f not in DIFFERENT):
            if flag in seen:
                first_cmd, first_type, _ = seen[flag]
                assert action.type == first_type, (flag, first_cmd, cmd)
                shared += 1
            else:
                seen[flag] = (cmd, action.type, action.choices)
    assert shared >= 20  # --duration, --requests-per-level, --output-len, --db, --config, --levels, --port, ...


@pytest.mark.parametrize("value", ["9" * 400, "-" + "9" * 400, "1" + "0" * 5000, "1e999", "nan", "0x10", "１２"])
def test_every_numeric_option_refuses_absurd_values_with_a_usage_error(value: str) -> None:
    numeric = [
        (cmd, a)
        for cmd, a in _options()
        if callable(a.type) and a.type not in PATH_TYPES and getattr(a.type, "__name__", "") == "parse"
    ]
    assert len(numeric) >= 25
    for cmd, action in numeric:
        parse = action.type
        assert callable(parse)
        with pytest.raises(argparse.ArgumentTypeError):
            parse(value)
            pytest.fail(f"{cmd} {action.option_strings} took {value[:20]!r}")


def test_large_in_range_integers_are_exact() -> None:
    args = build_parser().parse_args(["export", str(2**63 - 1), "--csv"])
    assert args.run == 2**63 - 1 and isinstance(args.run, int)
    args = build_parser().parse_args(["bench", "--url", "http://x:1", "--warmup", "000000000000000000000000012"])
    assert args.warmup == 12


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["bnech"], "did you mean 'bench'?"),
        (["confg", "path"], "did you mean 'config'?"),
        (["runs", "--status", "don"], "did you mean 'done'?"),
        (["config", "inti"], "did you mean 'init'?"),
        (["bench", "--url", "http://x:1", "--endpoint", "chta"], "did you mean 'chat'?"),
        (["replay", "x.log", "--engine", "sglnag"], "did you mean 'sglang'?"),
    ],
)
def test_a_typo_gets_did_you_mean(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_far_from_anything_gets_no_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["xyzzyq"]) == 2
    err = capsys.readouterr().err
    assert "did you mean" not in err and "choose from" in err


def test_a_mode_typo_gets_did_you_mean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        '[modes.eagle3]\nengine = "sglang"\nmodel = "/m"\n[modes.baseline]\nengine = "sglang"\nmodel = "/m"\n'
    )
    assert main(["up", "127.0.0.1:1", "--mode", "eagel3", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "unknown mode 'eagel3'" in err and "did you mean 'eagle3'?" in err


def test_a_missing_config_says_how_to_write_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SPECDASH_CONFIG", str(tmp_path / "none.toml"))
    assert main(["up", "127.0.0.1:1", "--mode", "eagle3"]) == 2
    err = capsys.readouterr().err
    assert "no config file at" in err and "specdash config init" in err and str(tmp_path) in err


@pytest.mark.parametrize(
    "argv", [["compare", "1", "2"], ["export", "1", "--json"], ["report", "1", "2", "-o", "{out}"]]
)
def test_store_readers_take_demo_as_runs_does(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    argv = [a.format(out=tmp_path / "r.html") for a in argv]
    assert main([*argv, "--demo"]) == 2
    err = capsys.readouterr().err
    assert "no demo store" in err and "specdash demo" in err
    demo = tmp_path / "data" / "specdash" / "demo.db"
    demo.parent.mkdir(parents=True)
    make_store(demo)
    assert main([*argv, "--demo"]) == 0
    out = capsys.readouterr().out
    assert ("baseline" in out and "eagle3" in out) if argv[0] == "compare" else True
    assert '"id": 1' in out if argv[0] == "export" else True
    assert (tmp_path / "r.html").exists() == (argv[0] == "report")
    assert main([*argv, "--demo", "--db", str(demo)]) == 2  # one store or the other
