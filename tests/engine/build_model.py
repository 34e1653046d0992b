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
}
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
    model.save_pretrained(out, safe_serialization=True)
    params = sum(p.numel() for p in model.parameters())
    print(f"{size}: {params / 1e6:.1f} M parameters in {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    build_model(args.size, args.out)


if __name__ == "__main__":
    main()
