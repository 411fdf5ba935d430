"""Per-token log-probabilities and entropies of a causal LM on a left-padded batch."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from envs.token_positions import position_ids_for


def token_logprobs(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-prob and entropy of each token given its prefix.

    Returns ``(logp, entropy)``, both ``(B, L)``: column ``t`` scores ``input_ids[:, t]`` under the
    distribution predicted at ``t - 1``. Column 0 has no prefix and is 0 in both.
    """
    logits = model(
        input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids_for(attention_mask), use_cache=False
    ).logits  # (B, L, V)
    logits = logits[:, :-1].float()  # (B, L-1, V) predicts tokens 1..L-1
    log_probs = F.log_softmax(logits, dim=-1)
    targets = input_ids[:, 1:]  # (B, L-1)
    logp = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, L-1)
    entropy = -(log_probs.exp() * log_probs).sum(-1)  # (B, L-1)
    zeros = torch.zeros_like(logp[:, :1])
    return torch.cat([zeros, logp], dim=1), torch.cat([zeros, entropy], dim=1)
