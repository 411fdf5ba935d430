"""Ensemble disagreement as epistemic uncertainty: pure functions over a leading member axis K.

For next-token distributions the measure is the mutual information between the prediction and the
member (BALD's score): ``H[mean_k p_k] - mean_k H[p_k]``, the mean KL of each member from the
ensemble mean. It is 0 when all members agree, whatever each one's own (aleatoric) entropy: a
member that is unsure between ``higher`` and ``lower`` for good reason adds nothing, members that
disagree do. For scalar heads it is the standard deviation across members.
"""

from __future__ import annotations

import torch
from einops import reduce


def entropy(probs: torch.Tensor) -> torch.Tensor:
    """``(..., V)`` probabilities -> ``(...)`` entropy in nats (0 log 0 = 0)."""
    return -(probs * torch.log(probs.clamp(min=1e-30))).sum(-1)


def mutual_information(probs: torch.Tensor) -> torch.Tensor:
    """``(K, ..., V)`` member distributions -> ``(...)`` disagreement in nats, >= 0."""
    mixture = reduce(probs, "k ... v -> ... v", "mean")  # (..., V)
    expected = reduce(entropy(probs), "k ... -> ...", "mean")  # (...)
    return (entropy(mixture) - expected).clamp(min=0.0)  # (...); clamp: rounding only


def member_std(values: torch.Tensor) -> torch.Tensor:
    """``(K, ...)`` member predictions -> ``(...)`` population standard deviation across members."""
    return values.std(dim=0, correction=0)
