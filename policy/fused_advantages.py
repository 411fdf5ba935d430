"""The critic-group fused advantage: a per-row convex mix of a critic advantage and a group advantage.

Why a mix, and which weight (the bias / variance argument)
-----------------------------------------------------------
Both parents estimate the advantage ``A_t = Q(s_t, a_t) - V(s_t)`` of a sampled turn as a return
minus a baseline, ``R - b``:

- the critic parent (``ppo_turn``) uses its lambda-return ``R^lambda_t`` (which bootstraps on the
  critic: less variance than the Monte-Carlo return, and the credit of later turns discounted by
  ``gamma * lambda``) and ``b_c = V_phi(s_t)``, a baseline of the right state, but one that carries the
  critic's fitting error, large early in training or off the critic's data. With
  ``algo.whiten_advantages`` the batch mean of ``R^lambda - V`` is removed too, so a constant offset
  of the critic costs nothing;
- the group parent (GRPO, GiGPO, ...) uses the episode score S and the mean score of the group,
  ``b_g``: unbiased for the value of the group's shared start state, with sampling variance
  ``nu / (n - 1)`` for n members (``nu`` the variance of a return from that state), but for a later
  turn a baseline of the start state, not of ``s_t``, and a score that credits every turn of the
  episode with the whole episode's outcome.

Write each parent as ``A_hat = A + e`` with error e. When the row's own return does not enter its
baseline (hence the leave-one-out group mean below), its mean square splits as

    E[(R - b)^2] = E[A^2] + E[e^2]:

the signal power ``E[A^2]`` is common to both parents and the rest is each parent's error, return
noise, credit mixing and baseline error together. For two estimates with independent errors the
convex mix ``w A_c + (1 - w) A_g`` has error ``w^2 s_c + (1 - w)^2 s_g``, smallest at the
inverse-variance weight

    w = s_g / (s_c + s_g),   error s_c s_g / (s_c + s_g) <= min(s_c, s_g),

no worse than the better parent and strictly better whenever both errors are finite and non-zero.
Since ``R - (w b_c + (1 - w) b_g)`` is the same mix, this is also the best mix of the two baselines.
EVPO's switch (the critic's advantage when its explained variance on the batch is positive, else
the mean baseline) is the special case ``w in {0, 1}``, decided by the critic against the batch mean
rather than against the group: it can do no better than the best convex weight, and it drops to the
group parent, credit mixing included, whenever the critic's explained variance dips below zero,
which is common early in training and with returns dominated by chance.

Estimating the errors on the batch (``inverse_variance_weights``), pooled per turn index t:

- ``m_c(t)``: mean over the rows at turn t of ``(R^lambda_t - V_phi(s_t))^2``, the critic parent's
  unwhitened advantage, centred on its batch mean when it is whitened;
- ``m_g(t)``: mean of ``(S - b_g)^2``, b_g the leave-one-out mean score of the row's episode group
  (0 for a group of a single trajectory: GRPO's singleton rule keeps the raw score);
- the common signal power is bounded by ``nu``, the pooled within-group variance of the Monte-Carlo
  return from the shared start state (each trajectory's first row in the batch, the only states all
  members provably share), which is ``E[A^2]`` plus the return's own noise;
- ``s = max(m - nu, 0)`` for each parent and ``w = s_g / (s_c + s_g)``, 1/2 when both are 0.

At t = 0 this gives ``s_g ~ nu / (n - 1)``: the leave-one-out sampling error. Subtracting ``nu`` rather
than the unknown ``E[A^2]`` removes the same amount from both errors, which makes the weight more
decisive than the ideal one but never moves it to the other side of 1/2. Assumptions, stated: the
errors are independent; ``nu`` measured at the start state stands for the signal power at later
turns; the weights come from the batch itself (per-turn pooling keeps each over many rows, but a
tiny batch gives noisy weights).

Scale and the limits
--------------------
The fused advantage is ``w * A_critic + (1 - w) * A_group`` with each parent's advantage exactly as
that algorithm computes it: ``A_critic`` is ``ppo_turn``'s (turn-level GAE, whitened over the batch's
action tokens when ``algo.whiten_advantages``) and ``A_group`` the group parent's (normalised in its
group). Both are on a unit scale, which PPO's clip range assumes, so the mix above is made on that
common scale. ``w = 0`` is the group parent exactly and ``w = 1`` the critic parent exactly
(``fuse``): the limits are the parents, bit for bit.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch

from policy.fused_config import FusedConfig
from policy.group_norm import group_index


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
    critic_residuals = critic_returns.double() - values.double()  # (N,)
    if centre_critic:
        critic_residuals = critic_residuals - critic_residuals.mean()
    group_residuals = scores.double() - leave_one_out_group_means(scores, group_ids, traj_ids)  # (N,)
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
