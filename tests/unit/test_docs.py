"""The docs stay true: every `specdash ...` command they show is accepted, the offline ones run, and every key
they list is one the app binds (and every binding is listed).

Commands come from `tests.support.doc_commands`. Each is parsed by the real parser
(`build_parser(everything=True)`). Those of the code blocks that need no host (`config`, `runs`, `compare`,
`report`, `export`, `replay`, `--help`) also run, in-process through `specdash.cli.main`, against a sandbox: a
fresh config, a store of two A/B runs (ids 1 and 2, also as the demo's store) and a real saved log as
`server.log`. Those that need a host (`connect`, `up`, `bench`, `tune HOST`, `demo`...) run against the
simulator behind the test sshd in `tests/integration/test_docs_host_commands.py`.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import pkgutil
import re
import shlex
import shutil
from pathlib import Path
from typing import NamedTuple

import pytest
from textual.app import App
from textual.binding import Binding
from textual.dom import DOMNode

import specdash.ui
from specdash.cli import main
from specdash.cli.commands import COMMANDS as ALL_COMMANDS
from specdash.cli.commands import build_parser
from tests.support.doc_commands import DOCS, OFFLINE, ROOT, DocCommand, doc_commands
from tests.support.results_store import make_store

KEYS_PAGE = ROOT / "docs" / "keys.md"
REPLAY_LOG = ROOT / "tests" / "fixtures" / "logs" / "synthetic" / "sglang_v056_eagle3_tp2_ready.log"

COMMANDS = doc_commands()
SUBCOMMANDS = {command.name for command in ALL_COMMANDS}


def test_the_docs_show_commands() -> None:
    """The extraction itself: the pages show commands, offline ones among them (else the runs below test nothing)."""
    assert sum(c.fenced for c in COMMANDS) >= 20 and sum(not c.fenced for c in COMMANDS) >= 20
    assert sum(c.fenced and c.argv[0] in OFFLINE for c in COMMANDS) >= 4
    assert {p.name for p in DOCS} >= {"README.md", "keys.md", "configuration.md", "measurement.md", "tune.md"}


@pytest.mark.parametrize("cmd", [pytest.param(c, id=f"{c.where}:{c.argv[0]}") for c in COMMANDS])
def test_every_command_shown_is_accepted_by_the_parser(cmd: DocCommand) -> None:
    if (
        not cmd.fenced and len(cmd.argv) == 1 and not cmd.argv[0].startswith("-")
    ):  # a command named in the text (`specdash sim`): it must exist
        assert cmd.argv[0] in SUBCOMMANDS, f"{cmd.where}: no command {cmd.argv[0]!r}"
        return
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            build_parser(everything=True).parse_args(cmd.argv)
        except SystemExit as exc:
            assert exc.code == 0, f"{cmd.where}: specdash {shlex.join(cmd.argv)}: {err.getvalue().strip()}"


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    for name, sub in (("HOME", ""), ("XDG_CONFIG_HOME", ".config"), ("XDG_DATA_HOME", ".local/share")):
        (home / sub).mkdir(parents=True, exist_ok=True)
        monkeypatch.setenv(name, str(home / sub))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local/state"))
    monkeypatch.setenv("COLUMNS", "100")
    data = home / ".local/share" / "specdash"
    data.mkdir(parents=True)
    assert make_store(data / "specdash.db") == (1, 2)
    shutil.copy(data / "specdash.db", data / "demo.db")
    shutil.copy(REPLAY_LOG, tmp_path / "server.log")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("cmd", [pytest.param(c, id=c.where) for c in COMMANDS if c.fenced and c.argv[0] in OFFLINE])
def test_every_offline_command_shown_runs(
    cmd: DocCommand, sandbox: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = sandbox / "config.toml"
    monkeypatch.setenv("SPECDASH_CONFIG", str(config))
    if cmd.argv[:2] != ["config", "init"]:
        assert main(["config", "init"]) == 0
        capsys.readouterr()
    code = main(cmd.argv)
    out, err = capsys.readouterr()
    assert code == 0, f"{cmd.where}: specdash {shlex.join(cmd.argv)} exited {code}: {err.strip()}"
    assert "Traceback" not in err
    assert out.strip() or cmd.argv[0] == "report" or "-o" in cmd.argv, f"{cmd.where}: printed nothing"


# --- keys ------------------------------------------------------------------------------------------------------

DISPLAY = {"?": "question_mark", "/": "slash", "esc": "escape", "]": "right_square_bracket", "[": "left_square_bracket"}
"""How the docs write a key -> Textual's key name."""


def app_bindings() -> dict[str, set[str]]:
    """Binding id -> its default keys, over every class in specdash.ui."""
    modules = [specdash.ui]
    for info in pkgutil.walk_packages(specdash.ui.__path__, "specdash.ui."):
        modules.append(importlib.import_module(info.name))
    found: dict[str, set[str]] = {}
    for module in modules:
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if not issubclass(cls, DOMNode) or not cls.__module__.startswith("specdash."):
                continue
            for binding in cls.BINDINGS:
                if isinstance(binding, Binding) and binding.id:
                    found.setdefault(binding.id, set()).update(k.strip() for k in binding.key.split(","))
    return found


class KeyRow(NamedTuple):
    keys: set[str]
    ids: list[str]
    line: int


def documented_keys() -> list[KeyRow]:
    rows = []
    for number, line in enumerate(KEYS_PAGE.read_text(encoding="utf-8").splitlines(), 1):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) != 3 or cells[0] in ("keys", "---"):
            continue
        keys: set[str] = set()
        for token in re.findall(r"`([^`]+)`(?:-`([^`]+)`)?", cells[0]):
            first, last = token
            if last:
                keys.update(str(n) for n in range(int(first), int(last) + 1))
            else:
                keys.add(DISPLAY.get(first, first))
        ids: list[str] = []
        for bid in re.findall(r"`([^`]+)`", cells[1]):
            ids.extend([f"select-mode-{n}" for n in range(1, 10)] if bid == "select-mode-N" else [bid])
        rows.append(KeyRow(keys, ids, number))
    return rows


def test_every_key_documented_is_bound_and_every_binding_documented() -> None:
    bound = app_bindings()
    rows = documented_keys()
    assert len(bound) >= 30 and len(rows) >= 10  # the walk and the parse found something
    documented = {bid for row in rows for bid in row.ids}
    assert not documented - bound.keys(), f"docs/keys.md lists ids the app does not have: {documented - bound.keys()}"
    assert not bound.keys() - documented, f"bindings missing from docs/keys.md: {sorted(bound.keys() - documented)}"
    for row in rows:
        if not row.ids:  # the command palette: Textual's own binding
            assert row.keys == {App.COMMAND_PALETTE_BINDING}, f"docs/keys.md:{row.line}"
            continue
        row_bound = set().union(*(bound[bid] for bid in row.ids))
        assert row.keys <= row_bound, f"docs/keys.md:{row.line}: {row.keys - row_bound} bound to none of {row.ids}"
        for bid in row.ids:
            assert bound[bid] & row.keys, f"docs/keys.md:{row.line}: none of {bid}'s keys {bound[bid]} is listed"
