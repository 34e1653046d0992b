#!/usr/bin/env bash
# Here (the development machine): builds .gpu/, the payload benchmarks/real_gpu.sh unpacks on the lent GPU
# machine (reference/gpu.md). Re-running reuses what is there. Needs network access to the package index.
#   bash benchmarks/real_gpu_prepare.sh            then, in the device calls: carry .gpu/app and one piece each
# Steps: vLLM 0.24.0's wheel; its requirements resolved for Python 3.12 manylinux with the machine's own torch,
# torchvision, triton, numba and apache-tvm-ffi stood in by metadata-only wheels (so the resolver never
# fetches CUDA wheels), the optional kernel packages left out; those wheels downloaded; FlashAttention-2, the
# Rust front end and the MoE kernels stripped (a dense Llama on Hopper loads none of them); tar | xz -2 (on a busy 2-core machine -9 took too long; 159 MB); split
# into 56 MiB pieces (the call's carry limit is 64 MiB with the working tree); scripts and specdash copied.
set -euo pipefail
cd "$(dirname "$0")/.."
G=.gpu
mkdir -p $G/dl $G/fake $G/whl $G/app
PLAT="--only-binary=:all: --python-version 3.12 --implementation cp --platform any"
for n in 17 24 27 28 31 34 35; do PLAT="$PLAT --platform manylinux_2_${n}_x86_64"; done
PLAT="$PLAT --platform manylinux2014_x86_64 --platform manylinux1_x86_64"
[ -f $G/dl/vllm-0.24.0-*.whl ] 2>/dev/null || pip download -q vllm==0.24.0 --no-deps $PLAT -d $G/dl
# Metadata-only stand-ins for what the machine has (reference/gpu.md, "What the machine has").
for spec in torch:2.11.0 torchvision:0.26.0 torchaudio:2.11.0 triton:3.6.0 numba:0.68.0 apache_tvm_ffi:0.1.11; do
    n=${spec%%:*} v=${spec##*:}+fake d=${spec%%:*}-${spec##*:}+fake.dist-info
    [ -f "$G/fake/$n-$v-py3-none-any.whl" ] && continue
    mkdir -p "$G/fake/w/$d"
    printf 'Metadata-Version: 2.1\nName: %s\nVersion: %s\n' "$n" "$v" >"$G/fake/w/$d/METADATA"
    printf 'Wheel-Version: 1.0\nGenerator: fake\nRoot-Is-Purelib: true\nTag: py3-none-any\n' >"$G/fake/w/$d/WHEEL"
    printf '%s/METADATA,,\n%s/WHEEL,,\n%s/RECORD,,\n' "$d" "$d" "$d" >"$G/fake/w/$d/RECORD"
    (cd "$G/fake/w" && zip -qr "../$n-$v-py3-none-any.whl" "$d") && rm -rf "$G/fake/w"
done
unzip -p $G/dl/vllm-0.24.0-*.whl '*/METADATA' | sed -n 's/^Requires-Dist: //p' | grep -v 'extra ==' |
    grep -v -E '^(numba|torch|torchaudio|torchvision|flashinfer|apache-tvm-ffi|tilelang|nvidia-|fastsafetensors|quack|tokenspeed|humming|mistral_common|opentelemetry-exporter)' \
        >$G/req.txt
[ -f $G/report.json ] || PIP_CONSTRAINT='' pip install -q --dry-run --ignore-installed --ignore-requires-python \
    --report $G/report.json $PLAT --target /tmp/rg-resolve --find-links $G/fake -r $G/req.txt \
    torch==2.11.0+fake torchvision==0.26.0+fake torchaudio==2.11.0+fake triton==3.6.0+fake numba==0.68.0+fake \
    apache-tvm-ffi==0.1.11+fake transformers==5.17.0 tokenizers==0.23.2 numpy==2.5.2 aiohttp==3.14.5 \
    httpx==0.28.1 textual==8.2.8 textual-plotext==1.0.1 'plotext>=5.2.8,<6' 'asyncssh>=2.24,<3' \
    'prometheus-client>=0.20,<1' 'platformdirs>=4.3' 'matplotlib>=3.9,<4'
# The machine's own (KINDS.md's package list) at versions that do: not carried.
python3 - "$G" <<'PY'
import json, sys
g = sys.argv[1]
have = {"torch", "torchaudio", "torchvision", "triton", "numba", "apache-tvm-ffi", "numpy", "transformers",
        "tokenizers", "opencv-python-headless", "matplotlib", "pillow", "fonttools", "contourpy", "kiwisolver",
        "cycler", "pyparsing", "setuptools", "ninja", "sentencepiece", "hf-xet", "sentry-sdk", "supervisor"}
pins = [f"{i['metadata']['name']}=={i['metadata']['version']}" for i in json.load(open(f"{g}/report.json"))["install"]
        if i["metadata"]["name"].lower().replace("_", "-") not in have]
open(f"{g}/pins.txt", "w").write("\n".join(pins) + "\n")
PY
pip download -q --no-deps $PLAT -d $G/whl -r $G/pins.txt
# Stood in above so that the resolver keeps vLLM's pin (0.1.9) out, but xgrammar 0.2.9 imports it (0.1.11): without
# it the API server dies importing xgrammar (tests/fixtures/logs/vllm_h100_real/*missing_tvm_ffi*).
pip download -q --no-deps $PLAT -d $G/whl apache-tvm-ffi==0.1.11
if [ ! -f $G/payload.tar.xz ]; then
    rm -rf $G/vsite && mkdir $G/vsite && (cd $G/vsite && unzip -q ../dl/vllm-0.24.0-*.whl)
    rm -f $G/vsite/vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so $G/vsite/vllm/vllm-rs \
        $G/vsite/vllm/_moe_C_stable_libtorch.abi3.so $G/vsite/vllm/third_party/deep_gemm/_C.cpython-31[0134]-*.so
    tar -C $G -cf - vsite whl | xz -2 -T2 >$G/payload.tar.xz.tmp && mv $G/payload.tar.xz.tmp $G/payload.tar.xz
fi
rm -f $G/payload.tar.xz.[0-9]*
split -d -a 1 -b 56m $G/payload.tar.xz $G/payload.tar.xz.
# The scripts and specdash's source (the call sends the session's checkout, which may not be this worktree).
rm -rf $G/app && mkdir -p $G/app/benchmarks $G/app/tests/engine
cp benchmarks/real_gpu.py benchmarks/real_gpu.sh $G/app/benchmarks/
cp tests/engine/build_model.py $G/app/tests/engine/
cp -r specdash $G/app/ && find $G/app -name __pycache__ -prune -exec rm -rf {} +
ls -la $G/payload.tar.xz.* && du -sh $G/app
