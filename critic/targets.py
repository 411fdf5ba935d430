"""Value targets: the GAE / lambda-return recursion, one implementation for the critic and the policy.

The recursion is verl's token-level GAE; turn-level GAE is the same recursion with one entry per
turn. The critic fits its values on the returns; the policy's estimators read the advantages.
"""

from __future__ import annotations

import torch


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    *,
    gamma: float = 1.0,
    lam: float = 1.0,
    bootstrap: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation, verl's token-level recursion, with an optional bootstrap.

    rewards, values, mask: (B, T). bootstrap: (B,) or None. Returns ``(advantages, returns)``, both
    (B, T), not whitened.

    Backwards over t: ``delta_t = r_t + gamma * V_next - V_t``, ``A_t = delta_t + gamma * lam * A_next``.
    Positions with mask 0 are skipped: ``V_next`` and ``A_next`` carry through them unchanged, and
    the entry stored there is the carried advantage (as in verl; it is masked out downstream).
    ``returns = advantages + values``.

    After the last valid position ``A_next = 0`` and ``V_next = bootstrap``: the value of the state
    that follows the row's last valid position. Leave it None (zeros, verl's behaviour) for an
    episode that ended ``done``; pass the critic's value of the last next-observation for an episode
    truncated by the turn cap. verl's ``compute_gae_advantage_return`` then whitens the advantages:
    ``policy.advantages.whiten(advantages, mask)`` reproduces that.
    """
    if not rewards.shape == values.shape == mask.shape or rewards.dim() != 2:
        raise ValueError(f"rewards, values, mask must share a (B, T) shape: {rewards.shape}, {values.shape}, {mask.shape}")
    if bootstrap is None:
        next_value = torch.zeros_like(values[:, 0])  # (B,)
    elif bootstrap.shape != values.shape[:1]:
        raise ValueError(f"bootstrap must be (B,) = {tuple(values.shape[:1])}, got {tuple(bootstrap.shape)}")
    else:
        next_value = bootstrap.to(dtype=values.dtype, device=values.device)  # (B,)
    valid = mask.bool()  # (B, T)
    next_adv = torch.zeros_like(values[:, 0])  # (B,)
    columns = []
    for t in reversed(range(rewards.shape[1])):
        delta = rewards[:, t] + gamma * next_value - values[:, t]  # (B,)
        adv_t = delta + gamma * lam * next_adv  # (B,)
        next_value = torch.where(valid[:, t], values[:, t], next_value)
        next_adv = torch.where(valid[:, t], adv_t, next_adv)
        columns.append(next_adv)
    advantages = torch.stack(columns[::-1], dim=1)  # (B, T)
    return advantages, advantages + values
