"""The policy's language model: a tiny Llama/Qwen2 built from a config, or a local pretrained one.

Nothing is downloaded. A tiny model is initialised from scratch over a word-level tokenizer; a
pretrained model is read from a local directory only (``local_files_only=True``), or from a GGUF file
de-quantised once into a cached directory (``policy.model_source``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from envs.tokenizer import build_word_tokenizer
from policy.config import PolicyConfig
from policy.model_source import cached_folder, resolve_pretrained
from policy.render import RENDER_VOCABULARY


def build_tiny_tokenizer(vocabulary: Iterable[str]) -> PreTrainedTokenizerFast:
    """The word-level tokenizer over an env's vocabulary plus the words the plain-text prompt adds."""
    return build_word_tokenizer([*vocabulary, *RENDER_VOCABULARY])


def build_tiny_lm(cfg: PolicyConfig, tokenizer: PreTrainedTokenizerBase, *, seed: int | None = None) -> PreTrainedModel:
    """A freshly initialised causal LM of ``cfg``'s shape over ``tokenizer``'s vocabulary.

    Embeddings are tied; pad/bos/eos ids come from the tokenizer; positions cover the longest row
    the policy ever builds (prompt + action + EOS). With ``seed`` the initialisation is drawn from
    that seed and the global torch RNG is left as it was; with None it draws from the global RNG.
    """
    if tokenizer.eos_token_id is None:
        raise ValueError("build_tiny_lm: the tokenizer has no EOS token; actions could never end")
    shape = dict(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_heads,
        max_position_embeddings=cfg.max_prompt_tokens + cfg.max_action_tokens + 1,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    if cfg.arch == "llama":
        config, model_class = LlamaConfig(**shape), LlamaForCausalLM
    else:
        config, model_class = Qwen2Config(**shape, use_sliding_window=False), Qwen2ForCausalLM
    if seed is None:
        return model_class(config)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return model_class(config)


def load_pretrained(
    value: str, cache_dir: str | os.PathLike | None = None
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Model and tokenizer of ``policy.pretrained=value``: a local Hugging Face folder, a ``.gguf`` file or a
    packaged model's name (its GGUF read through the de-quantised cache in ``cache_dir``)."""
    source = resolve_pretrained(value)
    return load_local_pretrained(source if source.is_dir() else cached_folder(source, cache_dir))


def load_local_pretrained(path: str | os.PathLike) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Model and tokenizer from a local Hugging Face directory, never from the network.

    The tokenizer pads on the left (generation appends on the right); one without a pad token
    pads with its EOS token.
    """
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"PolicyConfig.pretrained={path!r} is not a directory; give a local Hugging Face model folder")
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise FileNotFoundError(
            f"PolicyConfig.pretrained={path!r} has no config.json; it is not a saved Hugging Face model folder"
        )
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ValueError(f"{path}: the tokenizer has neither a pad nor an EOS token")
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def count_parameters(model: torch.nn.Module) -> int:
    """Distinct parameters (a tied embedding counts once)."""
    return sum(p.numel() for p in model.parameters())
