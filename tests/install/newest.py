"""Run by `make newest` (part of `make test`): specdash as a plain `pip install` gets it today, quiet.

`make newest` installs specdash into its own venv (`.venv-newest`) with the newest dependency versions that
pyproject's ranges allow (not the lock file our tests use), then runs this: `specdash --version`, `--help`,
every subcommand's `--help`, and an import of every subcommand's implementation (which imports asyncssh,
httpx, Textual...) must exit 0 and print nothing on stderr. Cryptography 51's DSA deprecation warnings on
every command (issue 29 point 10) were what the lock file hid.

Usage: `python tests/install/newest.py VENV`. Exit 1 with one line per noisy command.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path


def main() -> int:
    venv = Path(sys.argv[1]).absolute()
    python, specdash = venv / "bin" / "python", venv / "bin" / "specdash"
    listing = subprocess.run(
        [python, "-c", "from specdash.cli.commands import COMMANDS; print(' '.join(c.name for c in COMMANDS))"],
        capture_output=True,
        text=True,
        check=True,
    )
    names = listing.stdout.split()
    runs: list[list[str | Path]] = [[specdash, "--version"], [specdash, "--help"]]
    runs += [[specdash, name, "--help"] for name in names]
    runs += [[python, "-c", f"import specdash.cli.{name}"] for name in names]
    versions = subprocess.run(
        [python, "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True, check=True
    ).stdout.split()
    wanted = ("asyncssh", "cryptography", "httpx", "textual", "aiohttp", "matplotlib", "platformdirs")
    print("newest allowed:", " ".join(v for v in versions if v.lower().split("==")[0] in wanted))
    bad = []
    with tempfile.TemporaryDirectory() as home:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "XDG_", "SPECDASH_"))}
        env.update({f"XDG_{d}_HOME": f"{home}/{d.lower()}" for d in ("CONFIG", "DATA", "STATE", "CACHE")})
        for argv in runs:
            done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, cwd=home)
            shown = " ".join(str(a) for a in argv[1:])
            if done.returncode != 0 or done.stderr:
                first = (done.stderr.strip().splitlines() or ["(nothing on stderr)"])[0]
                bad.append(f"{Path(argv[0]).name} {shown}: exit {done.returncode}: {first}")
    for line in bad:
        print(f"NOISY: {line}", file=sys.stderr)
    print(f"{len(runs) - len(bad)}/{len(runs)} commands quiet on stderr with the newest allowed dependencies")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
