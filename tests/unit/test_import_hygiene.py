"""The core packages never import Textual: each is imported in a fresh interpreter and checked."""

from __future__ import annotations

import subprocess
import sys

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
]


@pytest.mark.parametrize("package", CORE_PACKAGES)
def test_package_does_not_import_textual(package: str) -> None:
    code = (
        "import importlib, pkgutil, sys\n"
        f"pkg = importlib.import_module({package!r})\n"
        "for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "    importlib.import_module(info.name)\n"
        "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith(('textual.', 'specdash.ui')))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"{package} pulls in {out.stdout.strip()}"
