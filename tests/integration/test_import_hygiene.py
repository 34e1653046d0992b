"""The core packages never import Textual: each is imported in a fresh interpreter and checked. No file-level import
cycle, however it is imported (module level or inside a function): grimp's graph, the one `lint-imports` reads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

CORE_PACKAGES = [
    "specdash.core",
    "specdash.engines",
    "specdash.remote",
    "specdash.server",
    "specdash.bench",
    "specdash.sim",
    "specdash.cli",
    "specdash.report",
    "specdash.tune",
]


DASHBOARD_COMMANDS = ("specdash.cli.connect", "specdash.cli.demo")
"""The two subcommands whose implementation is the Textual app (imported when they run, never by the parser)."""


@pytest.mark.parametrize("package", CORE_PACKAGES)
def test_package_does_not_import_textual(package: str) -> None:
    code = (
        "import importlib, pkgutil, sys\n"
        f"pkg = importlib.import_module({package!r})\n"
        "for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        f"    if info.name not in {DASHBOARD_COMMANDS!r}:\n"
        "        importlib.import_module(info.name)\n"
        "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith(('textual.', 'specdash.ui')))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"{package} pulls in {out.stdout.strip()}"


def _cycles(graph: grimp.ImportGraph) -> list[set[str]]:
    """The strongly connected components of more than one module: a module's component is what it reaches and
    what reaches it (grimp's own graph queries; fast enough for a few hundred modules)."""
    found: list[set[str]] = []
    for module in sorted(graph.modules):
        if any(module in c for c in found):
            continue
        component = graph.find_upstream_modules(module) & graph.find_downstream_modules(module)
        if component:
            found.append(component | {module})
    return found


def test_no_file_level_import_cycle() -> None:
    assert _cycles(grimp.build_graph("specdash", cache_dir=None)) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for name in ("p", "p.a", "p.b", "p.c"):
        graph.add_module(name)
    graph.add_import(importer="p.a", imported="p.b")
    graph.add_import(importer="p.b", imported="p.a")
    graph.add_import(importer="p.c", imported="p.a")
    assert _cycles(graph) == [{"p.a", "p.b"}]


def test_importing_asyncssh_runs_no_compiler_or_linker(tmp_path: Path) -> None:
    """asyncssh looks for liboqs on import; `ctypes.util.find_library` would link a throwaway program with `gcc` and
    run `ld` for a library the loader's cache does not list (specdash.remote.sshlib). A `gcc`, `cc` and `ld` first
    on PATH record any call; the search asks the loader's cache, and `find_library` is itself again afterwards."""
    calls = tmp_path / "calls"
    for tool in ("gcc", "cc", "ld"):
        fake = tmp_path / tool
        fake.write_text(f"#!/bin/sh\necho {tool} >> {calls}\nexit 1\n")
        fake.chmod(0o755)
    code = (
        "import ctypes.util\n"
        "search = ctypes.util.find_library\n"
        "import specdash.remote.ssh\n"
        "print(ctypes.util.find_library is search, 'asyncssh' in __import__('sys').modules)\n"
    )
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.split() == ["True", "True"], out
    assert not calls.exists(), calls.read_text()
