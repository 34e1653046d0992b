#!/usr/bin/env bash
# Installs the peer clients that benchmarks/probe_cost.py measures next to the probe:
# - SGLang's bench_serving into .bench-peers/venv: sglang without its dependencies (CUDA kernels, torch) plus only
#   what sglang.benchmark.serving and the dataset modules it loads import at module level;
# - vllm bench serve: the vLLM CPU venv and the local tokenizer of tests/engine/install_engine.sh, reused as they are.
# Re-running reuses what is there (stamp files). Quiet on success; on failure the step's log is printed.
# `install_peers.sh sglang` installs bench_serving alone (about 0.8 GB; the vLLM CPU venv is about 3.5 GB); it
# builds a local tokenizer into .bench-peers/tokenizer (`wan.py --bench-serving`; `probe_cost.py --tokenizer DIR`
# takes it too, its default is .engine/small).
set -euo pipefail
ONLY=${1:-all}
case "$ONLY" in all | sglang | vllm) ;; *) echo "usage: $0 [all|sglang|vllm]" >&2; exit 2 ;; esac

cd "$(dirname "$0")/.."
PEERS=.bench-peers
VENV=$PEERS/venv
SGLANG_VERSION=0.5.23
# sglang 0.5.23 pins these two; the rest it leaves unpinned.
PINS=(transformers==5.19.0 tokenizers==0.23.2)
# Module-level imports of sglang.benchmark.serving, its datasets package and sglang.srt.utils.network.
DEPS=(numpy orjson msgspec aiohttp requests tqdm psutil pyzmq pybase64 pillow datasets)
PYTHON=/usr/bin/python3.11
[ -x "$PYTHON" ] || PYTHON=python3

mkdir -p "$PEERS"
STEP_DIR=$PEERS STEP_LABEL=peers
# shellcheck source=tests/engine/step.sh
source tests/engine/step.sh

if [ "$ONLY" != vllm ] && [ ! -f "$VENV/.installed" ]; then
    rm -rf "$VENV"
    step venv "$PYTHON" -m venv "$VENV"
    step sglang "$VENV/bin/python" -m pip install -q --no-deps "sglang==$SGLANG_VERSION"
    step sglang-deps "$VENV/bin/python" -m pip install -q "${PINS[@]}" "${DEPS[@]}"
    step check "$VENV/bin/python" -c '
import importlib.util, pathlib
import aiohttp, datasets, msgspec, numpy, orjson, PIL, psutil, pybase64, requests, tqdm, transformers, zmq
root = pathlib.Path(importlib.util.find_spec("sglang").submodule_search_locations[0])
assert (root / "benchmark" / "serving.py").exists(), root'
    touch "$VENV/.installed"
fi

# bench_serving's tokenizer without the vLLM venv: the engine tests' byte-level BPE, trained here on the stdlib
# (nothing downloaded), for `benchmarks/wan.py --bench-serving` (`--tokenizer`, default .bench-peers/tokenizer).
if [ "$ONLY" != vllm ] && [ ! -f "$PEERS/tokenizer/tokenizer.json" ]; then
    step tokenizer "$VENV/bin/python" -c 'import sys; from pathlib import Path; sys.path.insert(0, "tests/engine")
from build_model import build_tokenizer; build_tokenizer(Path(sys.argv[1]))' "$PEERS/tokenizer"
fi

if [ "$ONLY" != sglang ] && { [ ! -f .engine/venv-vllm/.installed ] || [ ! -f .engine/small/.built ]; }; then
    bash tests/engine/install_engine.sh .engine
fi
[ "$ONLY" = vllm ] || echo "peers: sglang $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("sglang"))')"
[ "$ONLY" = sglang ] || echo "peers: vllm $(.engine/venv-vllm/bin/python -c 'import importlib.metadata as m; print(m.version("vllm"))')"
