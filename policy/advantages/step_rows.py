"""The step rows GiGPO and HGPO share (verl-agent conventions): rows grouped per trajectory, their
discounted step returns, and the episode term.

Both estimators take one row per agent step, in batch order (``StepRows``): the rows of one
trajectory are in time order but may be interleaved with rows of other trajectories. Per row: episode
group id (all members of a group start from the same state), trajectory id, time step, anchor
observation (the raw env observation, no history or prompt), step reward and the trajectory's
episode score.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import torch

from policy.advantages.group_norm import normalise_in_groups

EPISODE_STATS = ("rows", "trajectories")


@dataclass(frozen=True)
class StepRows:
    """N agent steps, one row each, in batch order (see the module docstring); ids are tensors or
    sequences of hashables."""

    group_ids: torch.Tensor | Sequence[Hashable]  # (N,) episode group: its members start from one state
    traj_ids: torch.Tensor | Sequence[Hashable]  # (N,) trajectory
    steps: torch.Tensor | Sequence[int]  # (N,) time step within the trajectory
    anchors: list[str]  # (N,) the raw env observation the step acted in
    step_rewards: torch.Tensor  # (N,) float
    episode_rewards: torch.Tensor  # (N,) float, the trajectory's episode score on each of its rows


def as_list(x: torch.Tensor | Sequence[Hashable]) -> list:
    return x.tolist() if isinstance(x, torch.Tensor) else list(x)


def trajectory_rows(
    group_ids: Sequence[Hashable], traj_ids: Sequence[Hashable], steps: Sequence[int]
) -> dict[Hashable, list[int]]:
    """Row indices of each trajectory, sorted by step. Checks that a trajectory has distinct steps
    and belongs to a single episode group."""
    rows: dict[Hashable, list[int]] = {}
    for i, traj in enumerate(traj_ids):
        rows.setdefault(traj, []).append(i)
    for traj, idx in rows.items():
        idx.sort(key=lambda i: steps[i])
        if len({steps[i] for i in idx}) != len(idx):
            raise ValueError(f"trajectory {traj!r} has a repeated step index")
        if len({group_ids[i] for i in idx}) != 1:
            raise ValueError(f"trajectory {traj!r} spans more than one episode group")
    return rows


def discounted_step_returns(
    step_rewards: torch.Tensor, rows: dict[Hashable, list[int]], gamma: float
) -> torch.Tensor:
    """``R_t = r_t + gamma * R_{t+1}`` within each trajectory (rows from ``trajectory_rows``).

    step_rewards: (N,). Returns (N,). The trajectories are laid out as a zero-padded (n_traj, L)
    table so the recursion runs once over L for all of them.
    """
    n_traj, length = len(rows), max((len(r) for r in rows.values()), default=0)
    table_index = torch.full((n_traj, length), -1, dtype=torch.long)  # (n_traj, L) row index or -1
    for j, idx in enumerate(rows.values()):
        table_index[j, : len(idx)] = torch.tensor(idx)
    table_index = table_index.to(step_rewards.device)
    present = table_index >= 0  # (n_traj, L)
    r = torch.where(present, step_rewards[table_index.clamp(min=0)], 0.0)  # (n_traj, L)
    returns = torch.zeros_like(r)  # (n_traj, L)
    running = r.new_zeros(n_traj)  # (n_traj,); not r[:, 0], which an empty batch (L = 0) does not have
    for t in reversed(range(length)):
        running = r[:, t] + gamma * running
        returns[:, t] = running
    out = torch.zeros_like(step_rewards)  # (N,)
    out[table_index[present]] = returns[present]
    return out


def episode_advantages(
    group_ids: list, rows: dict[Hashable, list[int]], episode_rewards: torch.Tensor, *, mode: str, eps: float, episode_stats: str
) -> torch.Tensor:
    """The episode score normalised in its episode group (sample std, GRPO's singleton rule)."""
    stat_rows = None
    if episode_stats == "trajectories":
        stat_rows = torch.zeros(len(group_ids), dtype=torch.bool)
        for traj, idx in rows.items():
            if len({episode_rewards[i].item() for i in idx}) != 1:
                raise ValueError(f"trajectory {traj!r} carries more than one episode score")
            stat_rows[idx[0]] = True
    return normalise_in_groups(
        episode_rewards, group_ids, mode=mode, ddof=1, eps=eps, singleton="raw", stat_rows=stat_rows
    )


def check_rows(n: int, **columns: Sequence) -> None:
    for name, col in columns.items():
        if len(col) != n:
            raise ValueError(f"{name} has {len(col)} rows, expected {n}")


def rows_and_returns(
    step_rows: StepRows, gamma: float
) -> tuple[list, dict[Hashable, list[int]], torch.Tensor]:
    """The checked columns both estimators start from: ``(group ids as a list, rows of each trajectory,
    step returns (N,))``; a column of the wrong length is a ``ValueError`` naming it."""
    groups, trajs, step_list = as_list(step_rows.group_ids), as_list(step_rows.traj_ids), as_list(step_rows.steps)
    n = step_rows.step_rewards.shape[0]
    check_rows(
        n, group_ids=groups, traj_ids=trajs, steps=step_list, anchors=step_rows.anchors,
        episode_rewards=step_rows.episode_rewards,
    )
    rows = trajectory_rows(groups, trajs, step_list)
    return groups, rows, discounted_step_returns(step_rows.step_rewards, rows, gamma)  # (N,)
