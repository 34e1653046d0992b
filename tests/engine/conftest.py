"""Fixtures for the real-engine tests: the vLLM CPU build in `.engine/` (made by `make test-engine`), run as
the remote test user over the loopback sshd.

The sshd machinery is the integration tier's; its session-scoped fixtures are re-exported here.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.integration.conftest import ssh_keys, sshd  # noqa: F401  (fixtures, re-exported)

REPO = Path(__file__).resolve().parents[2]
ENGINE_DIR = Path(os.environ.get("SPECDASH_ENGINE_DIR", REPO / ".engine")).resolve()
"""Where `tests/engine/install_engine.sh` put the engine venv and the models."""
ENGINE_PYTHON = ENGINE_DIR / "venv-vllm" / "bin" / "python"
MODEL_DIR = ENGINE_DIR / "small"
RESULTS_DIR = ENGINE_DIR / "results"
"""Measured figures and the real startup logs of the last run (git-ignored with `.engine/`)."""


@pytest.fixture(scope="module")
def engine_ready() -> Path:
    """The engine directory; skips (with the command to run) when the engine was not installed."""
    if not (ENGINE_DIR / "venv-vllm" / ".installed").is_file() or not (MODEL_DIR / ".built").is_file():
        pytest.skip(f"no vLLM CPU engine in {ENGINE_DIR}: run 'make test-engine'")
    return ENGINE_DIR
