#!/usr/bin/env bash
# The GPU machine's side of benchmarks/real_gpu.py, one device-tool call per invocation:
#   bash .gpu/app/benchmarks/real_gpu.sh STEP...
# STEP: stage (keep the carried payload pieces), env, models, setup, baseline, ngram, eagle3, crashes-args,
# crash-kv, pack TAG. The payload and app come from .gpu/ (carried); the machine keeps them in $RG while warm.
# Servers start with setsid and a log file (real_gpu.py); results go to $RG/results and, with pack, to $OUT.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
APP=$(dirname "$HERE")
CARRIED=$(dirname "$APP")
export RG=${RG:-/root/rg} RG_CALL_START=${RG_CALL_START:-$(date +%s)}
mkdir -p "$RG/pieces" "$RG/results"
# What worked on the lent H100 (reference/gpu.md): offline, no FlashInfer sampler, no usage report.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1
export PYTHONUNBUFFERED=1 PYTHONPATH="$RG/site:$APP${PYTHONPATH:+:$PYTHONPATH}"
PY="python3 $HERE/real_gpu.py"
for step in "$@"; do
    case $step in
    stage) for p in "$CARRIED"/payload.tar.xz.*; do [ -f "$p" ] && cp "$p" "$RG/pieces/"; done; ls -la "$RG/pieces" ;;
    env) $PY env; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv ;;
    models) PYTHONPATH= python3 "$APP/tests/engine/build_model.py" --size 730m --out "$RG/models/730m" \
        --eagle3-draft "$RG/models/eagle3" && cp "$APP/specdash/bench/prompts/chat.jsonl" "$RG/prompts.jsonl" ;;
    setup) $PY setup && python3 -c 'import vllm, specdash; print("vllm", vllm.__version__)' ;;
    baseline) $PY mode baseline --sleep ;;
    ngram) $PY mode ngram --sleep --restart ;;
    eagle3) $PY mode eagle3 ;;
    crashes-args) $PY crash bad_max_model_len & $PY crash ngram_min_above_max & wait ;;
    crash-kv) $PY crash kv_cache_no_memory ;;
    pack:*) $PY pack "$OUT" "${step#pack:}" ;;
    *) echo "unknown step $step" >&2 ;;
    esac
done
