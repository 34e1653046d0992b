"""The agent as a zipapp: this package's stdlib-only data plane, content-hashed so an unchanged client is
never re-sent (`~/.specdash/agent/specdash-agent-<hash>.pyz` on the host).

Built in memory from the installed modules with fixed timestamps: the same code gives the same bytes, hence
the same name. `__main__` checks the Python version before importing anything newer than 3.0.
"""

from __future__ import annotations

import functools
import hashlib
import io
import zipfile
from dataclasses import dataclass
from pathlib import Path

from specdash.bench.agent.wire import MIN_PYTHON

_ROOT = Path(__file__).resolve().parents[3]
MODULES = (
    "specdash/__init__.py",
    "specdash/core/__init__.py",
    "specdash/core/series.py",
    "specdash/core/lines.py",
    "specdash/limits.py",
    "specdash/errors.py",
    "specdash/safetext.py",
    "specdash/bench/__init__.py",
    "specdash/bench/compat.py",
    "specdash/bench/samples.py",
    "specdash/bench/sse.py",
    "specdash/bench/gauges.py",
    "specdash/bench/http1.py",
    "specdash/bench/probe.py",
    "specdash/bench/agent/__init__.py",
    "specdash/bench/agent/wire.py",
    "specdash/bench/agent/main.py",
)
"""Everything the agent imports: stdlib only, and Python >= `MIN_PYTHON` (unit tests check both, and
pyproject's `[tool.ruff.per-file-target-version]` lists these same files, so ruff holds them to 3.9)."""
TOO_OLD_EXIT = 3
"""The agent's exit status on a Python older than `MIN_PYTHON`."""

_NEED = ".".join(map(str, MIN_PYTHON))
MAIN = f"""import sys
if sys.version_info < {MIN_PYTHON!r}:
    sys.stderr.write("specdash agent needs Python >= {_NEED}, this is %d.%d\\n" % sys.version_info[:2])
    sys.exit({TOO_OLD_EXIT})
from specdash.bench.agent.main import entry
entry()
"""


@dataclass(frozen=True)
class Bundle:
    """The zipapp's bytes and its name."""

    data: bytes
    sha256: str

    @property
    def name(self) -> str:
        """File name on the host: the content hash makes it unique per client version."""
        return f"specdash-agent-{self.sha256[:16]}.pyz"


@functools.cache
def build() -> Bundle:
    """Build the zipapp (once per process)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel in ("__main__.py", *MODULES):
            info = zipfile.ZipInfo(rel, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            text = MAIN.encode() if rel == "__main__.py" else (_ROOT / rel).read_bytes()
            zf.writestr(info, text)
    data = buf.getvalue()
    return Bundle(data, hashlib.sha256(data).hexdigest())
