"""Step-row group advantages for multi-turn agents: GiGPO and HGPO (verl-agent conventions).

Both take one row per agent step, in batch order: the rows of one trajectory are in time order
but may be interleaved with rows of other trajectories. Per row: episode group id (all members
of a group start from the same state), trajectory id, time step, anchor observation (the raw
env observation, no history or prompt), step reward and the trajectory's episode score.
Every output is (N,) or (N, L) in the same row order. Spread a row's advantage over that
step's action tokens with ``policy.advantages.broadcast_to_tokens``; import both estimators from
``policy.advantages``, which re-exports them.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import torch

from policy.group_norm import NORM_MODES, check_option, normalise_in_groups

EPISODE_STATS = ("rows", "trajectories")
HGPO_EPS = 1e-6  # verl-agent's HGPO recipe: the std epsilon and the aggregation epsilon


@dataclass
class GiGPOResult:
    advantages: torch.Tensor  # (N,) episode + omega * step
    episode_advantages: torch.Tensor  # (N,)
    step_advantages: torch.Tensor  # (N,)
    step_returns: torch.Tensor  # (N,) discounted return from each step


@dataclass
class HGPOResult:
    advantages: torch.Tensor  # (N,) the weighted aggregate over levels
    level_advantages: torch.Tensor  # (N, L) one column per level, 0 where a level is absent
    levels: tuple[int, ...]  # the k of each column of level_advantages (0 = base group)
    step_returns: torch.Tensor  # (N,)


def _as_list(x: torch.Tensor | Sequence[Hashable]) -> list:
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
    running = torch.zeros_like(r[:, 0])  # (n_traj,)
    for t in reversed(range(length)):
        running = r[:, t] + gamma * running
        returns[:, t] = running
    out = torch.zeros_like(step_rewards)  # (N,)
    out[table_index[present]] = returns[present]
    return out


def _episode_advantages(
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


def _check_rows(n: int, **columns: Sequence) -> None:
    for name, col in columns.items():
        if len(col) != n:
            raise ValueError(f"{name} has {len(col)} rows, expected {n}")


def gigpo_advantages(
    group_ids: torch.Tensor | Sequence[Hashable],
    traj_ids: torch.Tensor | Sequence[Hashable],
    steps: torch.Tensor | Sequence[int],
    anchors: list[str],
    step_rewards: torch.Tensor,
    episode_rewards: torch.Tensor,
    *,
    gamma: float = 0.95,
    omega: float = 1.0,
    mode: str = "mean_std_norm",
    eps: float = 1e-6,
    episode_stats: str = "rows",
) -> GiGPOResult:
    """GiGPO (verl-agent): an episode-level GRPO term plus a step-level term on anchor states.

    step_rewards, episode_rewards: (N,) float, the episode score repeated on each of its rows.
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
    groups, trajs, step_list = _as_list(group_ids), _as_list(traj_ids), _as_list(steps)
    n = step_rewards.shape[0]
    _check_rows(n, group_ids=groups, traj_ids=trajs, steps=step_list, anchors=anchors, episode_rewards=episode_rewards)
    rows = trajectory_rows(groups, trajs, step_list)
    step_returns = discounted_step_returns(step_rewards, rows, gamma)  # (N,)
    episode = _episode_advantages(groups, rows, episode_rewards, mode=mode, eps=eps, episode_stats=episode_stats)
    step_keys = list(zip(groups, anchors, strict=True))
    step = normalise_in_groups(step_returns, step_keys, mode=mode, ddof=1, eps=eps, singleton="zero")  # (N,)
    return GiGPOResult(
        advantages=episode + omega * step,
        episode_advantages=episode,
        step_advantages=step,
        step_returns=step_returns,
    )


def hgpo_advantages(
    group_ids: torch.Tensor | Sequence[Hashable],
    traj_ids: torch.Tensor | Sequence[Hashable],
    steps: torch.Tensor | Sequence[int],
    anchors: list[str],
    step_rewards: torch.Tensor,
    episode_rewards: torch.Tensor,
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
    groups, trajs, step_list = _as_list(group_ids), _as_list(traj_ids), _as_list(steps)
    n = step_rewards.shape[0]
    _check_rows(n, group_ids=groups, traj_ids=trajs, steps=step_list, anchors=anchors, episode_rewards=episode_rewards)
    rows = trajectory_rows(groups, trajs, step_list)
    step_returns = discounted_step_returns(step_rewards, rows, gamma)  # (N,)

    history: list[list[str]] = [[] for _ in range(n)]  # anchors of the row's trajectory up to and including it
    for idx in rows.values():
        for t, i in enumerate(idx):
            history[i] = [anchors[j] for j in idx[max(0, t - K) : t + 1]]

    columns, levels = [], []
    if base_group:
        columns.append(_episode_advantages(groups, rows, episode_rewards, mode=mode, eps=HGPO_EPS, episode_stats="rows"))
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
