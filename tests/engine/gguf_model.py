"""A tiny random-weight qwen2 GGUF with Qwen3's tokenizer and chat template (never committed)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CONTEXT_LENGTH = 4096
EMBEDDING = 64
LAYERS = 2
HEADS = 4
KV_HEADS = 2
FFN = 128
IM_END = "<|im_end|>"
ENDOFTEXT = "<|endoftext|>"
TOKEN_NORMAL, TOKEN_CONTROL = 1, 3  # gguf TokenType values


@dataclass(frozen=True)
class Vocabulary:
    """Qwen3's tokenizer as GGUF wants it: tokens by id, their types, merges, template."""

    tokens: list[str]
    types: list[int]
    merges: list[str]
    chat_template: str

    def token_id(self, text: str) -> int:
        return self.tokens.index(text)


def read_vocabulary(tokenizer_dir: Path) -> Vocabulary:
    """tokenizer.json (BPE vocab, merges, added tokens as CONTROL) + tokenizer_config.json."""
    tokenizer = json.loads((tokenizer_dir / "tokenizer.json").read_text(encoding="utf-8"))
    config = json.loads((tokenizer_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    vocab: dict[str, int] = tokenizer["model"]["vocab"]
    added = {entry["content"]: entry["id"] for entry in tokenizer["added_tokens"]}
    size = max([*vocab.values(), *added.values()]) + 1
    tokens = [f"[PAD{i}]" for i in range(size)]
    types = [TOKEN_NORMAL] * size
    for text, index in vocab.items():
        tokens[index] = text
    for text, index in added.items():
        tokens[index], types[index] = text, TOKEN_CONTROL
    merges = [m if isinstance(m, str) else " ".join(m) for m in tokenizer["model"]["merges"]]
    return Vocabulary(tokens, types, merges, config["chat_template"])


def write_tiny_qwen2(
    path: Path, tokenizer_dir: Path, *, add_bos: bool = False, seed: int = 0
) -> Path:
    """Write the model; ``add_bos`` makes llama-server prepend <|endoftext|> to every prompt."""
    import gguf

    vocabulary = read_vocabulary(tokenizer_dir)
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), "qwen2")
    writer.add_name("tiny-random-qwen2-qwen3-tokenizer")
    writer.add_context_length(CONTEXT_LENGTH)
    writer.add_embedding_length(EMBEDDING)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_freq_base(1_000_000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(vocabulary.tokens)
    writer.add_token_types(vocabulary.types)
    writer.add_token_merges(vocabulary.merges)
    writer.add_eos_token_id(vocabulary.token_id(IM_END))
    writer.add_pad_token_id(vocabulary.token_id(ENDOFTEXT))
    writer.add_bos_token_id(vocabulary.token_id(ENDOFTEXT))
    writer.add_add_bos_token(add_bos)
    writer.add_chat_template(vocabulary.chat_template)
    for name, array in _tensors(len(vocabulary.tokens), rng):
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _tensors(n_vocab: int, rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
    head_dim = EMBEDDING // HEADS
    kv = KV_HEADS * head_dim

    def weights(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    tensors = [("token_embd.weight", weights(n_vocab, EMBEDDING))]
    for layer in range(LAYERS):
        block = f"blk.{layer}"
        tensors += [
            (f"{block}.attn_norm.weight", np.ones(EMBEDDING, dtype=np.float32)),
            (f"{block}.attn_q.weight", weights(EMBEDDING, EMBEDDING)),
            (f"{block}.attn_q.bias", weights(EMBEDDING)),
            (f"{block}.attn_k.weight", weights(kv, EMBEDDING)),
            (f"{block}.attn_k.bias", weights(kv)),
            (f"{block}.attn_v.weight", weights(kv, EMBEDDING)),
            (f"{block}.attn_v.bias", weights(kv)),
            (f"{block}.attn_output.weight", weights(EMBEDDING, EMBEDDING)),
            (f"{block}.ffn_norm.weight", np.ones(EMBEDDING, dtype=np.float32)),
            (f"{block}.ffn_gate.weight", weights(FFN, EMBEDDING)),
            (f"{block}.ffn_up.weight", weights(FFN, EMBEDDING)),
            (f"{block}.ffn_down.weight", weights(EMBEDDING, FFN)),
        ]
    tensors += [
        ("output_norm.weight", np.ones(EMBEDDING, dtype=np.float32)),
        ("output.weight", weights(n_vocab, EMBEDDING)),
    ]
    return tensors
