"""GiGPO (verl-agent): an episode-level GRPO term plus a step-level term on exact anchor states.

Rows as in ``policy.advantages.step_rows``; every output is (N,) in the same row order. Spread a
row's advantage over that step's action tokens with ``policy.advantages.broadcast_to_tokens``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from policy.advantages.group_norm import NORM_MODES, check_option, normalise_in_groups
from policy.advantages.step_rows import (
    EPISODE_STATS,
    StepRows,
    episode_advantages,
    rows_and_returns,
)


@dataclass
class GiGPOResult:
    advantages: torch.Tensor  # (N,) episode + omega * step
    episode_advantages: torch.Tensor  # (N,)
    step_advantages: torch.Tensor  # (N,)
    step_returns: torch.Tensor  # (N,) discounted return from each step


def gigpo_advantages(
    rows: StepRows,
    *,
    gamma: float = 0.95,
    omega: float = 1.0,
    mode: str = "mean_std_norm",
    eps: float = 1e-6,
    episode_stats: str = "rows",
) -> GiGPOResult:
    """GiGPO (verl-agent): an episode-level GRPO term plus a step-level term on anchor states.

    ``rows``: the N step rows (``StepRows``), the episode score repeated on each of a trajectory's rows.
    - Step returns ``R_t = r_t + gamma * R_{t+1}`` within each trajectory, ordered by ``steps``.
    - Episode advantage: the episode score normalised within its episode group, sample std,
      GRPO's singleton rule (a lone row keeps its raw score, ``/(1 + eps)`` under
      ``mean_std_norm``). ``episode_stats="rows"`` (verl-agent default) pools the statistics over
      all step rows, so longer trajectories weigh more; ``"trajectories"`` uses one value per
      trajectory (their rows must then carry one score).
    - Step groups: key (episode group, exact anchor string). Repeated visits of one trajectory
      join the same group; groups never cross episode groups. Step advantage: the step return
      normalised within its step group, sample std; a step group of one gives 0.
    - ``mode`` applies to both terms: ``"mean_std_norm"`` divides by ``std + eps``,
      ``"mean_norm"`` divides by nothing. A group whose values are all equal gives exactly 0.
    - Total: ``episode + omega * step``.
    """
    check_option("mode", mode, NORM_MODES)
    check_option("episode_stats", episode_stats, EPISODE_STATS)
    groups, trajectories, step_returns = rows_and_returns(rows, gamma)  # step_returns (N,)
    episode = episode_advantages(
        groups, trajectories, rows.episode_rewards, mode=mode, eps=eps, episode_stats=episode_stats
    )  # (N,)
    step_keys = list(zip(groups, rows.anchors, strict=True))
    step = normalise_in_groups(step_returns, step_keys, mode=mode, ddof=1, eps=eps, singleton="zero")  # (N,)
    return GiGPOResult(
        advantages=episode + omega * step,
        episode_advantages=episode,
        step_advantages=step,
        step_returns=step_returns,
    )
