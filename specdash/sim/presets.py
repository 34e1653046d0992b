"""Model presets: what the simulated model looks like on the GPUs (shards, memory, timings, architecture).

Both run on the seed's GPU, a 96 GB RTX PRO 6000 Blackwell (`sim.gpus`: 97,887 MiB, 94.97 GB free to torch
before anything loads). The big preset is Kimi K2.5 on eight of them (the calibration host); it is chosen for
model paths naming kimi/deepseek/k2 or for `--tp` >= 4. Everything else gets the small preset, a
Llama-3.1-8B-like model.
Durations are seconds at `--sim-time-scale 1`. With the big preset a TP=8 EAGLE-3 start takes about
550 s (weights ~8 s; target graphs 120 s, draft graphs 250 s, draft-extend graphs 120 s, warmup 30 s)
and a baseline start about 470 s (36 target graph batch sizes at ~11.5 s each).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Preset:
    """Numbers printed in the startup log and the seconds each startup phase takes."""

    name: str
    """Short name for logs and tests."""
    architecture: str
    """Target model class, as in `Load weight end. type=...`."""
    model_type: str
    """`model_type` of the HF config, as in `/model_info`."""
    shards: int
    """Safetensors shards (the shard bar's total)."""
    mla: bool
    """MLA models print one `KV size`, others `K size` and `V size`."""
    gpu_total_gb: float
    """Memory per GPU before anything loads."""
    weight_gb: float
    """Target weights per GPU."""
    kv_tokens: int
    """KV pool size in tokens (`max_total_num_tokens`)."""
    kv_gb: float
    """KV pool size per GPU."""
    context_len: int
    """Maximum context length."""
    pre_s: float
    """Tokenizer, process spawn, until `Init torch distributed begin.`."""
    dist_s: float
    """Distributed init."""
    weights_s: float
    """Target weight load (the shard bar)."""
    kv_s: float
    """KV pool allocation."""
    graph_per_bs_s: float
    """Target decode graph capture, seconds per batch size (plain decoding)."""
    verify_graph_per_bs_s: float
    """Target verify graph capture, seconds per batch size (speculation)."""
    draft_weights_s: float
    """Draft weight load."""
    draft_graph_per_bs_s: float
    """Draft decode graph capture per batch size: slower than the target's (sglang#10088)."""
    draft_extend_per_bs_s: float
    """Draft-extend graph capture per batch size."""
    warmup_s: float
    """The first forward pass of warmup (JIT, autotuning)."""
    draft_gb: float = 2.1
    """Draft weights per GPU."""


BIG = Preset(
    name="big",
    architecture="DeepseekV3ForCausalLM",
    model_type="kimi_k25",
    shards=64,
    mla=True,
    gpu_total_gb=94.97,
    weight_gb=72.43,
    # What is left of 96 GB under SGLang's static memory fraction after the weights (35 KB a token, MLA).
    kv_tokens=356_352,
    kv_gb=12.49,
    context_len=262_144,
    pre_s=6.0,
    dist_s=4.0,
    weights_s=8.0,
    kv_s=3.0,
    graph_per_bs_s=11.5,
    verify_graph_per_bs_s=12.0,
    draft_weights_s=2.0,
    draft_graph_per_bs_s=25.0,
    draft_extend_per_bs_s=12.0,
    warmup_s=30.0,
)

SMALL = Preset(
    name="small",
    architecture="LlamaForCausalLM",
    model_type="llama",
    shards=4,
    mla=False,
    gpu_total_gb=94.97,
    weight_gb=14.99,
    kv_tokens=442_368,
    kv_gb=27.0,
    context_len=131_072,
    pre_s=4.0,
    dist_s=1.0,
    weights_s=3.0,
    kv_s=1.0,
    graph_per_bs_s=0.35,
    verify_graph_per_bs_s=0.4,
    draft_weights_s=0.6,
    draft_graph_per_bs_s=1.5,
    draft_extend_per_bs_s=0.5,
    warmup_s=3.0,
    draft_gb=0.9,
)


def choose_preset(model_path: str, tp_size: int) -> Preset:
    """The big preset for Kimi/DeepSeek-like paths or TP >= 4, else the small one."""
    low = model_path.lower()
    if tp_size >= 4 or any(word in low for word in ("kimi", "deepseek", "k2")):
        return BIG
    return SMALL


def capture_batch_sizes(max_bs: int) -> list[int]:
    """SGLang's CUDA graph batch sizes up to `max_bs`, ascending (captured in reverse)."""
    sizes = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 513, 16)]
    return [bs for bs in sizes if bs <= max_bs] or [1]
