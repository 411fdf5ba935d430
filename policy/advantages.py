"""Advantage estimators as pure functions on tensors: GRPO / Dr. GRPO, whitening and SPPO. GiGPO and
HGPO live in ``policy/group_advantages.py`` and the GAE recursion ``gae`` (token or turn level: one
entry per turn) in ``critic/targets.py`` (the critic fits on the same returns); both are re-exported
here, so ``policy.advantages`` is the one place to import any estimator from.

Each function reproduces a convention of verl or verl-agent when configured as its docstring says;
``docs/conventions.md`` states those conventions.
"""

from __future__ import annotations

import torch

from critic.targets import gae
from policy.group_advantages import GiGPOResult, HGPOResult, gigpo_advantages, hgpo_advantages
from policy.group_norm import normalise_in_groups

__all__ = [
    "GiGPOResult",
    "HGPOResult",
    "broadcast_to_tokens",
    "gae",
    "gigpo_advantages",
    "grpo_advantages",
    "hgpo_advantages",
    "normalise_in_groups",
    "score_from_token_rewards",
    "sppo_advantages",
    "whiten",
]


def grpo_advantages(
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    *,
    norm_by_std: bool = True,
    std_ddof: int = 1,
    eps: float = 1e-6,
    singleton: str = "raw",
) -> torch.Tensor:
    """GRPO outcome advantages: each sample's score against the others of its group.

    rewards: (N,) scalar score per sample (``score_from_token_rewards`` for verl's score).
    group_ids: (N,) long. Returns (N,).

    Defaults reproduce verl's ``grpo`` estimator: ``(r - mean) / (std + 1e-6)`` with sample std;
    ``norm_by_std=False`` is Dr. GRPO (``r - mean``, verl ``norm_adv_by_std_in_grpo=False``).
    A group whose scores are all equal gives exactly 0. A group of one: ``singleton="raw"`` is verl's
    mean-0 / std-1 rule, i.e. ``r / (1 + eps)`` with std scaling and ``r`` without;
    ``singleton="zero"`` gives 0. See ``normalise_in_groups``.
    """
    return normalise_in_groups(
        rewards,
        group_ids,
        mode="mean_std_norm" if norm_by_std else "mean_norm",
        ddof=std_ddof,
        eps=eps,
        singleton=singleton,
    )


def score_from_token_rewards(token_rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """A trajectory's score as verl computes it: the sum of its token rewards over all positions.

    token_rewards, mask: (B, T). Returns (B,). The mask is deliberately not applied (verl sums the
    whole response row); it is taken only to check shapes.
    """
    if token_rewards.shape != mask.shape:
        raise ValueError(f"token_rewards {tuple(token_rewards.shape)} and mask {tuple(mask.shape)} differ")
    return token_rewards.sum(dim=-1)  # (B,)


def broadcast_to_tokens(adv: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """A per-sample scalar spread over its response tokens: (B,) x (B, T) -> (B, T), 0 off the mask."""
    if adv.dim() != 1 or adv.shape[0] != response_mask.shape[0]:
        raise ValueError(f"adv {tuple(adv.shape)} must be (B,) for response_mask {tuple(response_mask.shape)}")
    return adv.unsqueeze(-1) * response_mask.to(adv.dtype)  # (B, T)


def whiten(values: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True) -> torch.Tensor:
    """``(x - mean) / sqrt(var + 1e-8)`` with the mean and unbiased variance of the valid entries.

    values, mask: same shape. Like verl's ``masked_whiten``, every entry is transformed (masked ones
    too) and ``shift_mean=False`` adds the mean back. Fewer than two valid entries leave the
    unbiased variance undefined: ``ValueError`` (verl raises there too).
    """
    m = mask.to(values.dtype)
    n = m.sum()
    if n < 2:
        raise ValueError(f"whiten needs at least 2 valid entries, mask has {n.item():g}")
    mean = (values * m).sum() / n
    var = ((values - mean) ** 2 * m).sum() / (n - 1)
    out = (values - mean) * torch.rsqrt(var + 1e-8)
    return out if shift_mean else out + mean


def sppo_advantages(returns: torch.Tensor, value_logits: torch.Tensor) -> torch.Tensor:
    """Sequence-level (SPPO) advantage: ``A = R - sigmoid(logit)``, no normalisation.

    returns, value_logits: (B,), the logit of a scalar critic on the prompt. Returns (B,); the value
    is detached (advantages are targets). Spread over the response with ``broadcast_to_tokens``.
    """
    return returns.to(value_logits.dtype) - torch.sigmoid(value_logits.detach())
