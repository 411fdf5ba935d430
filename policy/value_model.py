"""A small token-level value model for PPO, and the helpers that align its values with actions.

The interface is the ``ValueFunction`` protocol: ``values = f(input_ids, attention_mask)``, one value
per position, where ``values[:, t]`` is the value of the state after reading tokens ``<= t``.
``ValueModel`` is a stand-in (a tiny decoder + a linear head); the latent critic replaces it later
behind the same protocol.

Alignment, for a row whose action occupies columns ``s .. L-1`` (left padding, prompt, action):

- ``turn_values``: ``values[:, s - 1]``, the value of the state before the turn (after the prompt).
- ``token_values``: at each response column ``t``, ``values[:, t - 1]``, the value of the state
  before token ``t`` was produced; 0 off the response. Its first response column equals the turn
  value, so token-level and turn-level GAE read the same critic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch
from torch import nn
from transformers import LlamaConfig, LlamaModel

from policy.logprobs import position_ids_for


@runtime_checkable
class ValueFunction(Protocol):
    """Anything that maps a left-padded token batch to per-position values."""

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """``(B, L)`` ids and mask -> ``(B, L)`` float values; column ``t`` values the prefix ``<= t``."""
        ...


@dataclass
class ValueModelConfig:
    """Shape of the tiny decoder backbone behind ``ValueModel``."""

    vocab_size: int
    """Number of token ids (the tokenizer's ``len``)."""
    hidden_size: int = 32
    """Width of the decoder."""
    num_layers: int = 1
    """Number of decoder blocks."""
    num_heads: int = 2
    """Attention heads; must divide ``hidden_size``."""
    intermediate_size: int = 64
    """Width of each block's MLP."""
    max_position_embeddings: int = 512
    """Longest row (in tokens) the rotary embedding is prepared for."""

    def __post_init__(self) -> None:
        for name in (
            "vocab_size",
            "hidden_size",
            "num_layers",
            "num_heads",
            "intermediate_size",
            "max_position_embeddings",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"ValueModelConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"ValueModelConfig.hidden_size ({self.hidden_size}) must be divisible by num_heads ({self.num_heads})"
            )


class ValueModel(nn.Module):
    """A Llama decoder backbone with a linear value head: ``(B, L)`` ids -> ``(B, L)`` values."""

    def __init__(self, config: ValueModelConfig) -> None:
        super().__init__()
        self.config = config
        self.backbone = LlamaModel(
            LlamaConfig(
                vocab_size=config.vocab_size,
                hidden_size=config.hidden_size,
                intermediate_size=config.intermediate_size,
                num_hidden_layers=config.num_layers,
                num_attention_heads=config.num_heads,
                num_key_value_heads=config.num_heads,
                max_position_embeddings=config.max_position_embeddings,
            )
        )
        self.head = nn.Linear(config.hidden_size, 1)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Per-position values, 0 on padding columns."""
        hidden = self.backbone(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids_for(attention_mask),
            use_cache=False,
        ).last_hidden_state  # (B, L, H)
        values = self.head(hidden).squeeze(-1).float()  # (B, L)
        return torch.where(attention_mask.bool(), values, torch.zeros_like(values))


def first_response_column(response_mask: torch.Tensor) -> torch.Tensor:
    """Column of each row's first response token, ``(B,)`` long; raises if a row has none or starts at 0."""
    has_response = response_mask.bool().any(dim=-1)  # (B,)
    if not bool(has_response.all()):
        rows = (~has_response).nonzero().flatten().tolist()
        raise ValueError(f"response_mask has no response token on rows {rows}")
    first = response_mask.bool().long().argmax(dim=-1)  # (B,) argmax returns the first maximum
    if bool((first == 0).any()):
        rows = (first == 0).nonzero().flatten().tolist()
        raise ValueError(f"response starts at column 0 on rows {rows}: there is no state before the turn")
    return first


def turn_values(values: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Value of the state before each row's turn: the column just before its first response token.

    ``values`` and ``response_mask`` are ``(B, L)``; returns ``(B,)``.
    """
    before = first_response_column(response_mask) - 1  # (B,)
    return values.gather(1, before.unsqueeze(1)).squeeze(1)  # (B,)


def token_values(values: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Values aligned for token-level GAE: at response column ``t``, the value at ``t - 1``; 0 elsewhere.

    ``values`` and ``response_mask`` are ``(B, L)``; returns ``(B, L)``.
    """
    shifted = torch.cat([torch.zeros_like(values[:, :1]), values[:, :-1]], dim=1)  # (B, L)
    return shifted * response_mask.to(shifted.dtype)
