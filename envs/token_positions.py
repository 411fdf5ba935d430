"""Position ids of a left-padded token batch, shared by every causal LM that reads one (the policy,
the token critic): the tokenizers here pad on the left, so positions count from each row's first real
token."""

from __future__ import annotations

import torch


def position_ids_for(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions that start at 0 on each row's first real token, so left padding changes nothing."""
    positions = attention_mask.long().cumsum(dim=-1) - 1  # (B, L)
    return positions.clamp(min=0)
