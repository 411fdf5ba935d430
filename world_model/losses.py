"""Teacher-forced losses of the world model, one value per ensemble member: pure functions.

Every function takes predictions with a leading member axis K and returns ``(K,)``; the caller sums
over members, so each member is trained as if it were alone (the shared encoder gets every
member's gradient).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange, repeat


def token_nll(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean negative log-likelihood per target token.

    ``logits`` (K, R, S, V), ``targets`` (R, S) ids, ``mask`` (R, S) 1 on scored tokens -> (K,).
    """
    members = logits.shape[0]
    flat = rearrange(logits.float(), "k r s v -> (k r s) v")  # (K*R*S, V)
    wanted = rearrange(repeat(targets, "r s -> k r s", k=members), "k r s -> (k r s)")  # (K*R*S,)
    nll = rearrange(
        F.cross_entropy(flat, wanted, reduction="none"), "(k r s) -> k r s", k=members, r=targets.shape[0]
    )
    weight = mask.to(nll.dtype)  # (R, S)
    return (nll * weight).sum(dim=(1, 2)) / weight.sum().clamp(min=1.0)  # (K,)


def regression_mse(predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``(K, R)`` predictions, ``(R,)`` targets -> ``(K,)`` mean squared error."""
    return ((predictions.float() - targets.float()) ** 2).mean(dim=1)  # (K,)


def done_bce(logits: torch.Tensor, dones: torch.Tensor) -> torch.Tensor:
    """``(K, R)`` done logits, ``(R,)`` 0/1 targets -> ``(K,)`` mean binary cross-entropy."""
    targets = repeat(dones.float(), "r -> k r", k=logits.shape[0])  # (K, R)
    return F.binary_cross_entropy_with_logits(logits.float(), targets, reduction="none").mean(dim=1)  # (K,)


def scored_token_nll(
    logits: torch.Tensor, targets: torch.Tensor, parts: torch.Tensor, count: int, weights: torch.Tensor | None = None
) -> torch.Tensor:
    """``token_nll`` from logits taken at the scored positions only, for several parts at once.

    ``logits`` (K, P, V) at the P scored positions, ``targets`` (P,) ids, ``parts`` (P,) which of
    ``count`` parts each position belongs to -> (K, count): each part's mean NLL per scored token,
    the same value ``token_nll`` gives on that part's padded rows (0 for a part with no token).
    ``weights`` (K, P), when given, weight each member's tokens (a weighted mean per part).
    """
    members, positions = logits.shape[:2]
    nll = F.cross_entropy(
        rearrange(logits.float(), "k p v -> (k p) v"), repeat(targets, "p -> (k p)", k=members), reduction="none"
    ).view(members, positions)  # (K, P)
    if weights is None:
        totals = nll.new_zeros(members, count).index_add_(1, parts, nll)  # (K, count)
        return totals / torch.bincount(parts, minlength=count).to(nll.dtype).clamp(min=1.0)  # (K, count)
    totals = nll.new_zeros(members, count).index_add_(1, parts, nll * weights)  # (K, count)
    mass = weights.new_zeros(members, count).index_add_(1, parts, weights)  # (K, count)
    return totals / mass.clamp(min=1e-12)  # (K, count)
