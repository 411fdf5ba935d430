"""Sequence-level PPO (SPPO): one advantage per episode from a scalar critic's logit."""

from __future__ import annotations

import torch


def sppo_advantages(returns: torch.Tensor, value_logits: torch.Tensor) -> torch.Tensor:
    """Sequence-level (SPPO) advantage: ``A = R - sigmoid(logit)``, no normalisation.

    returns, value_logits: (B,), the logit of a scalar critic on the prompt. Returns (B,); the value
    is detached (advantages are targets). Spread over the response with ``broadcast_to_tokens``.
    """
    return returns.to(value_logits.dtype) - torch.sigmoid(value_logits.detach())
