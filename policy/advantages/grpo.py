"""GRPO and Dr. GRPO outcome advantages: each sample's score normalised in its group (verl conventions)."""

from __future__ import annotations

import torch

from policy.advantages.group_norm import normalise_in_groups


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
