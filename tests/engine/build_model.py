"""Build a random-weight Llama model and a byte-level BPE tokenizer locally (nothing is downloaded).

Run with the engine venv's python (it has torch, transformers and tokenizers):

    .engine/venv-vllm/bin/python tests/engine/build_model.py --size small --out .engine/small

Recipe: reference/environment.md §9.2. The weights are random (torch seed 0), so the text is nonsense and,
at temperature 0, falls into loops: n-gram speculation gets unrealistically high acceptance on it. That is
fine for testing the control panel, and it is why figures measured on it are labelled as toy numbers.
"""

from __future__ import annotations

import argparse
import sysconfig
from pathlib import Path

SIZES = {
    # name: (layers, hidden, intermediate, heads, kv heads)
    "tiny": (2, 256, 512, 4, 2),
    "small": (8, 1024, 2816, 16, 8),
    # 729.8 M parameters, 1.4 GiB in bf16, saved in 4 shards: the real-GPU benchmark's model (benchmarks/real_gpu.py).
    "730m": (16, 2048, 5632, 32, 8),
}
SHARDS = {"730m": "400MB"}
"""Largest shard per size where one file is not wanted (transformers' `max_shard_size`)."""
SPECIAL = ["<unk>", "<s>", "</s>", "<pad>"]
VOCAB = 2048
CHAT_TEMPLATE = (
    "{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


def build_tokenizer(out: Path) -> object:
    """Train a byte-level BPE on the first 200 stdlib `*.py` files and save it in HF format."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = [str(p) for p in sorted(stdlib.glob("*.py"))[:200]]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train(files, trainer)
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        model_max_length=2048,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    return fast


def build_model(size: str, out: Path) -> None:
    """Save tokenizer, config, generation config and bf16 random weights (safetensors) into `out`."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(out)
    layers, hidden, inter, heads, kv_heads = SIZES[size]
    ids = {name: tok.convert_tokens_to_ids(name) for name in ("<s>", "</s>", "<pad>")}  # type: ignore[attr-defined]
    config = LlamaConfig(
        vocab_size=len(tok),  # type: ignore[arg-type]
        hidden_size=hidden,
        intermediate_size=inter,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=64,
        max_position_embeddings=2048,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        bos_token_id=ids["<s>"],
        eos_token_id=ids["</s>"],
        pad_token_id=ids["<pad>"],
    )
    config.dtype = torch.bfloat16
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.generation_config = GenerationConfig(
        bos_token_id=ids["<s>"], eos_token_id=ids["</s>"], pad_token_id=ids["<pad>"]
    )
    model.save_pretrained(out, safe_serialization=True, max_shard_size=SHARDS.get(size, "5GB"))
    params = sum(p.numel() for p in model.parameters())
    print(f"{size}: {params / 1e6:.1f} M parameters in {out}")


def build_eagle3_draft(target: Path, out: Path) -> None:
    """Save a one-layer EAGLE-3 draft with random weights for the model in `target` (same hidden size and vocabulary).

    The tensor names are those of published EAGLE-3 checkpoints (`midlayer.*`, `fc`, `norm`, `lm_head`), which vLLM's
    `LlamaForCausalLMEagle3` loads; the first layer's attention reads the embedding and the hidden state side by side
    (2 x hidden inputs) and `fc` folds three of the target's hidden states into one. Its acceptance is near zero.
    """
    import json

    import torch
    from safetensors.torch import save_file

    cfg = json.loads((target / "config.json").read_text())
    hidden, inter = cfg["hidden_size"], cfg["intermediate_size"]
    heads, kv_heads, head_dim = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    vocab = cfg["vocab_size"]
    torch.manual_seed(1)

    def rand(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape) * 0.02).to(torch.bfloat16)

    weights = {
        "midlayer.self_attn.q_proj.weight": rand(heads * head_dim, 2 * hidden),
        "midlayer.self_attn.k_proj.weight": rand(kv_heads * head_dim, 2 * hidden),
        "midlayer.self_attn.v_proj.weight": rand(kv_heads * head_dim, 2 * hidden),
        "midlayer.self_attn.o_proj.weight": rand(hidden, heads * head_dim),
        "midlayer.mlp.gate_proj.weight": rand(inter, hidden),
        "midlayer.mlp.up_proj.weight": rand(inter, hidden),
        "midlayer.mlp.down_proj.weight": rand(hidden, inter),
        "midlayer.input_layernorm.weight": torch.ones(hidden, dtype=torch.bfloat16),
        "midlayer.hidden_norm.weight": torch.ones(hidden, dtype=torch.bfloat16),
        "midlayer.post_attention_layernorm.weight": torch.ones(hidden, dtype=torch.bfloat16),
        "fc.weight": rand(hidden, 3 * hidden),
        "norm.weight": torch.ones(hidden, dtype=torch.bfloat16),
        "lm_head.weight": rand(vocab, hidden),
    }
    out.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    shared = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim")
    shared += ("vocab_size", "max_position_embeddings", "rms_norm_eps", "bos_token_id", "eos_token_id")
    draft_cfg = {key: cfg[key] for key in shared}
    draft_cfg.update(
        architectures=["LlamaForCausalLMEagle3"],
        model_type="llama",
        num_hidden_layers=1,
        draft_vocab_size=vocab,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
        hidden_act="silu",
    )
    (out / "config.json").write_text(json.dumps(draft_cfg, indent=1))
    params = sum(t.numel() for t in weights.values())
    print(f"eagle3 draft: {params / 1e6:.1f} M parameters in {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--eagle3-draft", type=Path, help="also build an EAGLE-3 draft for the model into this folder")
    args = parser.parse_args()
    build_model(args.size, args.out)
    if args.eagle3_draft:
        build_eagle3_draft(args.out, args.eagle3_draft)


if __name__ == "__main__":
    main()
