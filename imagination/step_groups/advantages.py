"""The arithmetic of counterfactual step groups, as pure functions on tensors.

At a real state s_t the group holds the real action a_t (column 0) and G alternatives sampled from
the policy (columns 1..G). Member i is played h turns in the world model and valued

    Q_i = sum_{j < n_i} gamma^j * r_ij  +  gamma^{n_i} * V(s_i,end) * [member i was cut off, not done]

(``n_i <= h`` turns; ``r`` the imagined, shaped rewards; V the latent critic). The real action's step
advantage is its Q normalised within the group, GiGPO's step-group rule with the group made on
purpose instead of found by exact-match anchors; the total is GiGPO's ``episode + omega * step``.
"""

from __future__ import annotations

import torch

from policy.advantages.group_norm import check_option, normalise_in_groups

NORM_MODES = ("mean_std_norm", "mean_norm")


def imagined_values(
    rewards: torch.Tensor,
    lengths: torch.Tensor,
    bootstrap: torch.Tensor,
    cut_off: torch.Tensor,
    *,
    gamma: float,
) -> torch.Tensor:
    """``(M,)`` discounted value of each imagined member.

    rewards: (M, H) the member's imagined turn rewards, zero-padded after its ``lengths`` (M,) turns;
    bootstrap: (M,) the critic's value of the state after its last turn, added with weight
    ``gamma ** length`` only where ``cut_off`` (M,) bool is True (horizon, halting or turn cap), never
    after an episode the model ended ``done``.
    """
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be (M, H), got shape {tuple(rewards.shape)}")
    m, h = rewards.shape
    for name, x in (("lengths", lengths), ("bootstrap", bootstrap), ("cut_off", cut_off)):
        if tuple(x.shape) != (m,):
            raise ValueError(f"{name} must be ({m},), got shape {tuple(x.shape)}")
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    if bool((lengths < 1).any()) or bool((lengths > h).any()):
        raise ValueError(f"lengths must be in [1, {h}]")
    steps = torch.arange(h, dtype=torch.float64)  # (H,)
    discount = gamma**steps  # (H,)
    played = steps[None, :] < lengths[:, None]  # (M, H)
    reward_part = (rewards.double() * discount * played).sum(dim=1)  # (M,)
    tail = torch.where(cut_off.bool(), gamma ** lengths.double() * bootstrap.double(), 0.0)  # (M,)
    return (reward_part + tail).to(rewards.dtype if rewards.is_floating_point() else torch.float32)


def counterfactual_step_advantages(
    values: torch.Tensor, *, mode: str = "mean_std_norm", eps: float = 1e-6
) -> torch.Tensor:
    """``(R, G + 1)`` step advantages of every member of each row's group.

    values: (R, G + 1), column 0 the real action's Q, columns 1..G its siblings'. Each row is one
    group: ``(Q - mean) / (std + eps)`` with the sample std (ddof 1) under ``mean_std_norm``,
    ``Q - mean`` under ``mean_norm``; a group whose values are all equal gives exactly 0, and so does
    a group of one (G = 0), as a GiGPO step group of one does.
    """
    check_option("mode", mode, NORM_MODES)
    if values.dim() != 2:
        raise ValueError(f"values must be (R, G + 1), got shape {tuple(values.shape)}")
    r, g1 = values.shape
    keys = torch.arange(r).repeat_interleave(g1)  # (R * (G + 1),) one key per row's group
    flat = normalise_in_groups(values.reshape(-1), keys, mode=mode, ddof=1, eps=eps, singleton="zero")
    return flat.reshape(r, g1)  # (R, G + 1)


def select_step_advantages(
    counterfactual: torch.Tensor,
    exact_match: torch.Tensor,
    uncertainty: torch.Tensor,
    *,
    threshold: float | None,
    available: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(step advantage (R,), fell back (R,) bool)``: the counterfactual one, or GiGPO's exact-match one.

    A row falls back where no counterfactual group was formed (``available`` False) or where the world
    model's ``uncertainty`` at its state is above ``threshold`` (never when ``threshold`` is None). A
    NaN uncertainty counts as above any threshold.
    """
    r = counterfactual.shape[0]
    for name, x in (("exact_match", exact_match), ("uncertainty", uncertainty)):
        if tuple(x.shape) != (r,):
            raise ValueError(f"{name} must be ({r},), got shape {tuple(x.shape)}")
    ok = torch.ones(r, dtype=torch.bool) if available is None else available.bool().clone()
    if threshold is not None:
        ok &= uncertainty <= threshold  # NaN compares False: falls back
    return torch.where(ok, counterfactual, exact_match), ~ok


def total_advantages(episode: torch.Tensor, step: torch.Tensor, *, omega: float) -> torch.Tensor:
    """GiGPO's combination: ``episode + omega * step`` (N,)."""
    if episode.shape != step.shape:
        raise ValueError(f"episode {tuple(episode.shape)} and step {tuple(step.shape)} differ in shape")
    return episode + omega * step
