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


def cpu_flags() -> set[str]:
    """The CPU's feature flags (Linux)."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return set()


ENGINE_DTYPE = "bfloat16" if "avx512_bf16" in cpu_flags() else "float32"
"""The model is saved in bf16, which vLLM's CPU kernels run natively only with AVX512-BF16. Without it (e.g. an
AVX2-only EPYC) bf16 falls back to slow torch matmuls (measured: 26 tok/s at C=1 and 37 at C=16, and
`Failed to create oneDNN linear` in the log); float32 is 2-4x faster per matmul there."""


@pytest.fixture(scope="module")
def engine_ready() -> Path:
    """The engine directory; skips (with the command to run) when the engine was not installed."""
    if not (ENGINE_DIR / "venv-vllm" / ".installed").is_file() or not (MODEL_DIR / ".built").is_file():
        pytest.skip(f"no vLLM CPU engine in {ENGINE_DIR}: run 'make test-engine'")
    return ENGINE_DIR
