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


def scored_token_logprobs(
    model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, scored_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``token_logprobs`` on the scored tokens only (``scored_mask`` (B, L), e.g. the response mask): the LM
    head is applied to the hidden states of the positions that predict them and nowhere else.

    The full-vocabulary logits of every position, (B, L, V), are what fills memory with a large vocabulary.
    The model keeps only the columns that predict a scored token in some row (``logits_to_keep`` as a 1-D
    index tensor, which every recent transformers release reads the same way; a 2-D boolean mask is not),
    so the call still goes through the model's own forward (Fabric, DDP, autocast). A policy's rows are
    left-padded with the scored action tokens at their end, so those columns are few: (B, C, V) with C
    about the longest action. Returns ``(logp, entropy)``, both (B, L), 0 off the scored tokens and in
    column 0 (no prefix).
    """
    scored = scored_mask[:, 1:].bool()  # (B, L-1) tokens 1..L-1 that are scored
    predicting = torch.cat([scored, torch.zeros_like(scored[:, :1])], dim=1)  # (B, L) position t-1 predicts token t
    columns = predicting.any(dim=0).nonzero().flatten()  # (C,) ascending
    logits = model(
        input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids_for(attention_mask),
        use_cache=False, logits_to_keep=columns,
    ).logits  # (B, C, V)
    if logits.dim() != 3 or logits.shape[1] != columns.numel():
        raise ValueError(f"{type(model).__name__} did not keep the scored columns (logits {tuple(logits.shape)}): "
                         "policy.scored_logits needs a model whose forward takes logits_to_keep as an index tensor")
    logits = logits[predicting[:, columns]]  # (N, V), row-major over (row, position) like boolean indexing
    log_probs = F.log_softmax(logits.float(), dim=-1)  # (N, V)
    targets = input_ids[:, 1:][scored]  # (N,)
    logp = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (N,)
    entropy = -(log_probs.exp() * log_probs).sum(-1)  # (N,)
    zeros = torch.zeros(scored.shape, dtype=logp.dtype, device=logp.device)  # (B, L-1)
    column0 = torch.zeros_like(zeros[:, :1])
    return (torch.cat([column0, zeros.masked_scatter(scored, logp)], dim=1),
            torch.cat([column0, zeros.masked_scatter(scored, entropy)], dim=1))
