"""A built wheel, installed into a fresh venv, carries the stylesheets and finds them."""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_ships_and_finds_styles(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = dist.glob("specdash-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "specdash/styles/app.tcss" in names

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = str(env_dir / "bin" / "python")
    # --no-deps: only the wheel's own files matter here, and the test must not reach a registry.
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True)
    out = subprocess.run(
        [py, "-c", "from specdash.ui.styles import css_paths; print(*css_paths())"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    (found,) = out.stdout.split()
    assert found.startswith(str(env_dir)) and found.endswith("specdash/styles/app.tcss")
