"""A tiny Llama GGUF file written by the ``gguf`` package: a few kilobytes that transformers reads like a real one."""

from __future__ import annotations

from pathlib import Path

import numpy as np

HIDDEN, LAYERS, HEADS, KV_HEADS, FFN = 8, 2, 2, 1, 16
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def byte_tokens() -> list[str]:
    """GPT-2's 256 byte-level symbols (its ``bytes_to_unicode``), so any text encodes."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    codes, extra = list(printable), 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            codes.append(256 + extra)
            extra += 1
    return [chr(c) for _, c in sorted(zip(printable, codes, strict=True))]


def tiny_weights(vocab: int, seed: int = 0) -> dict[str, np.ndarray]:
    """GGUF tensor name -> float32 array in Hugging Face's (out, in) layout; embeddings tied (no output.weight)."""
    rng = np.random.default_rng(seed)
    head_dim = HIDDEN // HEADS

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.2).astype(np.float32)

    weights = {"token_embd.weight": w(vocab, HIDDEN), "output_norm.weight": 1 + w(HIDDEN)}
    for i in range(LAYERS):
        weights |= {
            f"blk.{i}.attn_norm.weight": 1 + w(HIDDEN), f"blk.{i}.ffn_norm.weight": 1 + w(HIDDEN),
            f"blk.{i}.attn_q.weight": w(HIDDEN, HIDDEN), f"blk.{i}.attn_k.weight": w(KV_HEADS * head_dim, HIDDEN),
            f"blk.{i}.attn_v.weight": w(KV_HEADS * head_dim, HIDDEN), f"blk.{i}.attn_output.weight": w(HIDDEN, HIDDEN),
            f"blk.{i}.ffn_gate.weight": w(FFN, HIDDEN), f"blk.{i}.ffn_up.weight": w(FFN, HIDDEN),
            f"blk.{i}.ffn_down.weight": w(HIDDEN, FFN),
        }
    return weights


def write_tiny_gguf(path: Path, *, architecture: str = "llama", seed: int = 0) -> dict[str, np.ndarray]:
    """Write the tiny model to ``path``; returns the tensors written, by GGUF name."""
    import gguf

    tokens = SPECIAL + byte_tokens() + ["Ġt", "he"]
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_context_length(64)
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([3] * len(SPECIAL) + [1] * (len(tokens) - len(SPECIAL)))
    writer.add_token_merges(["Ġ t", "h e"])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_pad_token_id(2)
    writer.add_chat_template(CHAT_TEMPLATE)
    weights = tiny_weights(len(tokens), seed)
    for name, array in weights.items():
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return weights
