"""The critic-group fused advantage: a per-row convex mix of a critic advantage and a group advantage.

Both parents estimate a turn's advantage as a return minus a baseline; their errors differ (the
critic's fitting error against the group's sampling noise and credit mixing), so the mix
``w * A_critic + (1 - w) * A_group`` with the inverse-variance weight ``w = s_g / (s_c + s_g)`` is no
worse than the better parent. ``inverse_variance_weights`` estimates the two errors on the batch,
per turn index; ``evpo`` is the special case ``w in {0, 1}``. Both parents are on a unit scale, and
``w = 0`` / ``w = 1`` give the group / critic parent bit for bit (``fuse``). The derivation and its
assumptions are in ``docs/fused_advantage_derivation.md``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch

from policy.advantages.config import FusedConfig
from policy.advantages.group_norm import group_index


def leave_one_out_group_means(
    scores: torch.Tensor,
    group_ids: Sequence[Hashable] | torch.Tensor,
    traj_ids: Sequence[Hashable] | torch.Tensor,
) -> torch.Tensor:
    """(N,) per row: the mean score of the *other* trajectories of its episode group; 0 when the group
    holds a single trajectory (GRPO's singleton rule: the baseline is 0, the score is kept).

    scores: (N,) the episode score on each of its trajectory's rows (one value per trajectory, taken
    from its first row in the batch).
    """
    groups = group_ids.tolist() if isinstance(group_ids, torch.Tensor) else list(group_ids)
    trajs = traj_ids.tolist() if isinstance(traj_ids, torch.Tensor) else list(traj_ids)
    score_of: dict[Hashable, float] = {}
    group_of: dict[Hashable, Hashable] = {}
    for row, traj in enumerate(trajs):
        if traj not in score_of:
            score_of[traj], group_of[traj] = float(scores[row]), groups[row]
    total: dict[Hashable, float] = {}
    count: dict[Hashable, int] = {}
    for traj, group in group_of.items():
        total[group] = total.get(group, 0.0) + score_of[traj]
        count[group] = count.get(group, 0) + 1
    out = []
    for traj in trajs:
        group = group_of[traj]
        others = count[group] - 1
        out.append((total[group] - score_of[traj]) / others if others else 0.0)
    return torch.tensor(out, dtype=torch.float64)  # (N,)


def pooled_start_variance(
    returns: torch.Tensor, group_ids: Sequence[Hashable] | torch.Tensor, start_rows: torch.Tensor
) -> float:
    """``nu``: the pooled within-group sample variance of the returns on ``start_rows`` (N,) bool,
    one row per trajectory at its group's shared start state:
    ``sum_g sum_i (G_i - mean_g)^2 / sum_g (n_g - 1)``. 0 when no group has two start rows."""
    gid, n_groups = group_index(group_ids)  # (N,)
    keep = start_rows.bool()
    g, x = gid[keep], returns.detach().double()[keep]  # (M,)
    count = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, g, torch.ones_like(x))  # (G,)
    mean = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, g, x) / count.clamp(min=1)  # (G,)
    dof = (count - 1).clamp(min=0).sum()
    if dof <= 0:
        return 0.0
    return float(((x - mean[g]) ** 2).sum() / dof)


ROUNDING = 1e-12  # relative size under which a float64 difference of a few operations is rounding


def difference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(N,) ``a - b`` in float64, 0 where it is within rounding of its operands: equal returns in
    other units (a shifted reward) leave a residue of a few ulps that must not count as an error."""
    a, b = a.double(), b.double()
    diff = a - b  # (N,)
    return torch.where(diff.abs() <= ROUNDING * torch.maximum(a.abs(), b.abs()), 0.0, diff)


def inverse_variance_weights(
    critic_residuals: torch.Tensor, group_residuals: torch.Tensor, levels: torch.Tensor, noise_var: float
) -> torch.Tensor:
    """(N,) the critic's weight per row, pooled over the rows that share its level (turn index).

    critic_residuals: (N,) ``R^lambda_t - V(s_t)`` (centred when the critic's advantage is whitened).
    group_residuals: (N,) ``S - b_g``. noise_var: ``nu``.
    Per level: ``sigma^2 = max(mean residual^2 - nu, 0)`` for each parent (a difference within
    rounding of its terms counts as 0) and ``w = sigma_g^2 / (sigma_c^2 + sigma_g^2)``, 1/2 when both are 0.
    """
    lid, n_levels = group_index(levels)  # (N,)
    ones = torch.ones(lid.shape[0], dtype=torch.float64)
    count = torch.zeros(n_levels, dtype=torch.float64).index_add_(0, lid, ones)  # (K,)

    def excess(residuals: torch.Tensor) -> torch.Tensor:
        mean_sq = (
            torch.zeros(n_levels, dtype=torch.float64).index_add_(0, lid, residuals.double() ** 2) / count
        )
        gap = mean_sq - noise_var  # (K,)
        # A gap within rounding of the terms is no error at all (else the weight would depend on the units).
        return torch.where(gap > 1e-9 * torch.maximum(mean_sq, torch.tensor(noise_var)), gap, 0.0)  # (K,)

    sigma_c, sigma_g = excess(critic_residuals), excess(group_residuals)  # (K,)
    total = sigma_c + sigma_g
    weight = torch.where(total > 0, sigma_g / torch.where(total > 0, total, 1.0), 0.5)  # (K,)
    return weight[lid]  # (N,)


def explained_variance_of(values: torch.Tensor, returns: torch.Tensor) -> float:
    """``1 - Var[G - V] / Var[G]`` (population variances) over all rows; 0 when Var[G] is 0."""
    g, v = returns.detach().double(), values.detach().double()
    var_g = g.var(unbiased=False) if g.numel() else torch.tensor(0.0)
    if var_g <= 0:
        return 0.0
    return float(1.0 - (g - v).var(unbiased=False) / var_g)


def fused_critic_weights(
    cfg: FusedConfig,
    *,
    critic_returns: torch.Tensor,
    values: torch.Tensor,
    mc_returns: torch.Tensor,
    scores: torch.Tensor,
    group_ids: Sequence[Hashable] | torch.Tensor,
    traj_ids: Sequence[Hashable] | torch.Tensor,
    levels: torch.Tensor,
    start_rows: torch.Tensor,
    centre_critic: bool = True,
) -> torch.Tensor:
    """(N,) float64, the critic parent's weight for each row under ``cfg.weighting``.

    critic_returns: (N,) the critic's lambda-return targets ``R^lambda_t``. values: (N,) ``V_phi(s_t)``.
    mc_returns: (N,) Monte-Carlo return-to-go (bootstrapped at truncations), read on ``start_rows`` for
    ``nu``. scores: (N,) episode score S. levels: (N,) the turn index each weight is pooled over.
    start_rows: (N,) bool, each trajectory's first row in the batch. centre_critic: the critic's
    advantage is whitened (its batch mean removed), so its residuals are centred too.
    ``evpo`` reads the explained variance of ``values`` on ``critic_returns`` (as the learner logs it).
    """
    n = critic_returns.shape[0]
    if cfg.weighting == "fixed":
        return torch.full((n,), float(cfg.critic_weight), dtype=torch.float64)
    if cfg.weighting == "evpo":
        chosen = explained_variance_of(values, critic_returns) > cfg.evpo_threshold
        return torch.full((n,), 1.0 if chosen else 0.0, dtype=torch.float64)
    critic_residuals = difference(critic_returns, values)  # (N,)
    if centre_critic:
        critic_residuals = critic_residuals - critic_residuals.mean()
    group_residuals = difference(scores, leave_one_out_group_means(scores, group_ids, traj_ids))  # (N,)
    noise_var = pooled_start_variance(mc_returns, group_ids, start_rows)
    return inverse_variance_weights(critic_residuals, group_residuals, levels, noise_var)


def fuse(
    critic_advantages: torch.Tensor, group_advantages: torch.Tensor, critic_weight: torch.Tensor
) -> torch.Tensor:
    """``w * A_critic + (1 - w) * A_group`` per row, over its tokens: (B, L), (B, L), (B,) -> (B, L).

    Rows with w = 0 are ``group_advantages`` and rows with w = 1 ``critic_advantages``, exactly.
    """
    if (
        critic_advantages.shape != group_advantages.shape
        or critic_weight.shape != critic_advantages.shape[:1]
    ):
        raise ValueError(
            f"fuse needs (B, L), (B, L), (B,); got {tuple(critic_advantages.shape)}, "
            f"{tuple(group_advantages.shape)}, {tuple(critic_weight.shape)}"
        )
    w = critic_weight.to(critic_advantages.dtype).unsqueeze(1)  # (B, 1)
    mixed = w * critic_advantages + (1 - w) * group_advantages  # (B, L)
    # Exact parents at the limits, whatever the rounding of the products.
    mixed = torch.where(w == 0, group_advantages, mixed)
    return torch.where(w == 1, critic_advantages, mixed)
