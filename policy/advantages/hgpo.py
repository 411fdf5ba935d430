"""HGPO (verl-agent recipe): step returns compared in nested history-context groups.

Rows as in ``policy.advantages.step_rows``; every output is (N,) or (N, L) in the same row order.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from policy.advantages.group_norm import NORM_MODES, check_option, normalise_in_groups
from policy.advantages.step_rows import (
    StepRows,
    episode_advantages,
    rows_and_returns,
)

HGPO_EPS = 1e-6  # verl-agent's HGPO recipe: the std epsilon and the aggregation epsilon


@dataclass
class HGPOResult:
    advantages: torch.Tensor  # (N,) the weighted aggregate over levels
    level_advantages: torch.Tensor  # (N, L) one column per level, 0 where a level is absent
    levels: tuple[int, ...]  # the k of each column of level_advantages (0 = base group)
    step_returns: torch.Tensor  # (N,)


def hgpo_advantages(
    rows: StepRows,
    *,
    gamma: float = 0.95,
    K: int = 2,  # noqa: N803 (the paper's name)
    alpha: float = 1.0,
    mode: str = "mean_std_norm",
    base_group: bool = False,
) -> HGPOResult:
    """HGPO (verl-agent recipe): step returns compared in nested history-context groups.

    Same rows and step returns as ``gigpo_advantages``. For the step at position t of its
    trajectory (t = 0 for its earliest step), levels ``k = 1 .. min(K + 1, t + 1)`` group it by
    (episode group, the last k anchors of its trajectory ending at t); k = 1 is GiGPO's step group.
    Each level group normalises its step returns with population std (ddof 0):
    ``(R - mean) / (std + 1e-6)`` under ``mean_std_norm``, ``R - mean`` under ``mean_norm``;
    a group of one is skipped (advantage 0), an all-equal group gives exactly 0.
    Only non-zero level advantages aggregate, with weight ``(k + 1) ** alpha``:
    ``sum(w * a) / (sum(w) + 1e-6)``; a step with none gets 0.
    ``base_group=True`` adds a level k = 0 of weight 1 holding GiGPO's episode advantage
    (rows pooled, sample std, same mode, eps 1e-6), also counted only when non-zero.
    There is no other episode term.

    ``level_advantages`` is (N, K + 1), column j holding level k = j + 1; with the base group it is
    (N, K + 2) and column j holds level k = j (column 0 the base). ``levels`` names the k of each column.
    """
    check_option("mode", mode, NORM_MODES)
    if K < 0:
        raise ValueError(f"K={K} must be >= 0")
    groups, trajectories, step_returns = rows_and_returns(rows, gamma)  # step_returns (N,)
    n, anchors = rows.step_rewards.shape[0], rows.anchors

    history: list[list[str]] = [[] for _ in range(n)]  # anchors of the row's trajectory up to and including it
    for idx in trajectories.values():
        for t, i in enumerate(idx):
            history[i] = [anchors[j] for j in idx[max(0, t - K) : t + 1]]

    columns, levels = [], []
    if base_group:
        columns.append(
            episode_advantages(groups, trajectories, rows.episode_rewards, mode=mode, eps=HGPO_EPS, episode_stats="rows")
        )
        levels.append(0)
    for k in range(1, K + 2):
        has_level = torch.tensor([len(h) >= k for h in history], device=step_returns.device)  # (N,)
        # Rows without level k get a key of their own, so they form singleton groups (advantage 0).
        keys = [(groups[i], tuple(history[i][-k:])) if len(history[i]) >= k else ("absent", i) for i in range(n)]
        adv = normalise_in_groups(step_returns, keys, mode=mode, ddof=0, eps=HGPO_EPS, singleton="zero")
        columns.append(torch.where(has_level, adv, 0.0))
        levels.append(k)
    level_adv = torch.stack(columns, dim=1)  # (N, L)
    weights = torch.tensor([(k + 1.0) ** alpha if k > 0 else 1.0 for k in levels], dtype=level_adv.dtype,
                           device=level_adv.device)  # (L,)
    active = (level_adv != 0).to(level_adv.dtype) * weights  # (N, L)
    total_w = active.sum(dim=1)  # (N,)
    agg = (active * level_adv).sum(dim=1) / (total_w + HGPO_EPS)  # (N,)
    agg = torch.where(total_w > 0, agg, 0.0)
    return HGPOResult(advantages=agg, level_advantages=level_adv, levels=tuple(levels), step_returns=step_returns)
