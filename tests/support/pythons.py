"""Other Pythons for the probe agent's tests: the pyenv interpreters of this machine image (3.8, 3.9, 3.10),
made runnable by the remote test user.

pyenv keeps them under root's home (`~/.pyenv/versions/X.Y.Z`, 0700 on our machines), where the test user
of the sshd fixtures cannot reach them, and they link `libpython` by an absolute RUNPATH in there. So
`for_test_user` lays a tree of hard links (a copy across file systems) in a 0755 temp dir, without the test
suite and site-packages (the host has a bare stdlib, and no uvloop), and a `python3` wrapper that points the
loader at the copy's `lib/`. Found by version, never by guessing a path: `find(3, 9)` is the newest 3.9.x.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.support.sshd import make_dir


def versions_dir() -> Path:
    """pyenv's versions directory (`$PYENV_ROOT/versions`, else `~/.pyenv/versions`)."""
    root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    return Path(root) / "versions"


def find(major: int, minor: int) -> Path | None:
    """The newest installed pyenv CPython `major.minor.*` (its version directory), or None."""
    found: list[tuple[int, Path]] = []
    base = versions_dir()
    if not base.is_dir():
        return None
    for entry in base.iterdir():
        words = entry.name.split(".")
        if len(words) != 3 or not all(w.isdigit() for w in words):
            continue  # not a plain CPython release (pypy3.10-7.3, 3.12-dev, a virtualenv name)
        if (int(words[0]), int(words[1])) == (major, minor) and (entry / "bin" / f"python{major}.{minor}").is_file():
            found.append((int(words[2]), entry))
    return max(found)[1] if found else None


def skip_reason(major: int, minor: int) -> str:
    """What a test that needs `major.minor` says when there is none."""
    return f"no pyenv CPython {major}.{minor}.x under {versions_dir()} (the machine image has 3.8, 3.9 and 3.10)"


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def for_test_user(version_dir: Path) -> Path:
    """A `python3` the sshd fixtures' test user can run: the interpreter at `version_dir`, laid out under
    a 0755 temp dir (remove its parent when done: `path.parents[2]`)."""
    name = version_dir.name
    major_minor = ".".join(name.split(".")[:2])
    top = make_dir(f"specdash-py{major_minor.replace('.', '')}-")
    tree = top / name
    skip = shutil.ignore_patterns("test", "tests", "site-packages", "idlelib", "tkinter", "turtledemo", "ensurepip")
    shutil.copytree(version_dir / "lib", tree / "lib", symlinks=True, ignore=skip, copy_function=_link_or_copy)
    (tree / "bin").mkdir()
    real = tree / "bin" / f"python{major_minor}"
    _link_or_copy(str(version_dir / "bin" / f"python{major_minor}"), str(real))
    for path in (top, tree, *tree.rglob("*")):
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)
    wrapper = tree / "bin" / "python3"
    wrapper.write_text(f'#!/bin/sh\nLD_LIBRARY_PATH="{tree / "lib"}" exec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper
