"""Which tokenizer the tiny policy gets for an env: word-level over its vocabulary, or byte-level BPE
trained on its probe episodes (``policy.tokenizer``).

``auto`` keeps the word-level tokenizer for the hand-written envs (their results were measured with
it, and every one of their parsers accepts its spacing) and gives the adapters BPE, whose text
round-trips exactly and whose vocabulary need not be known in advance.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from transformers import PreTrainedTokenizerFast

from envs.probe import probe_texts
from envs.registry import ADAPTERS, make
from policy.bpe_tokenizer import build_bpe_tokenizer
from policy.config import TOKENIZERS
from policy.model import build_tiny_tokenizer
from policy.render import RENDER_VOCABULARY

PROBE_EPISODES = 32


def tokenizer_kind(choice: str, env_name: str) -> str:
    """``word`` or ``bpe``: ``choice`` itself, or for ``auto``, BPE exactly for the adapters."""
    if choice not in TOKENIZERS:
        raise ValueError(f"policy.tokenizer must be one of {TOKENIZERS}, got {choice!r}")
    if choice != "auto":
        return choice
    return "bpe" if env_name in ADAPTERS else "word"


def env_tokenizer(choice: str, env_name: str, env_kwargs: dict[str, Any],
                  vocabulary: Sequence[str] | None = None) -> PreTrainedTokenizerFast:
    """The tiny policy's tokenizer for env ``env_name``; ``vocabulary`` (default: the env's) is the
    word list of the word-level one and a hint (extra training text) for BPE."""
    env = make(env_name, **env_kwargs)
    words = list(env.vocabulary() if vocabulary is None else vocabulary)
    if tokenizer_kind(choice, env_name) == "word":
        return build_tiny_tokenizer(words)
    texts = probe_texts(env, episodes=PROBE_EPISODES)
    return build_bpe_tokenizer([*texts, " ".join(words), *RENDER_VOCABULARY, "\n"])
