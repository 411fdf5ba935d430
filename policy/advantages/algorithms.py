"""Which advantage each algorithm gives each turn of a rollout batch.

The learner trains on one row per agent turn (see ``policy.rollout_batch``). This module turns a
batch of trajectories into those rows' advantages for each algorithm name, as an explicit dict of
functions (no registry):

- ``grpo`` / ``drgrpo``: the episode return, normalised in its group (``drgrpo`` without std);
  statistics pooled over step rows (verl-agent's multi-turn default) or per trajectory.
- ``gigpo``: episode advantage + omega * anchor-state step advantage (verl-agent GiGPO).
- ``hgpo``: hierarchy of history-context step groups (verl-agent HGPO recipe).
- ``ppo_turn``: turn-level GAE with the critic's value of the state before each turn.
- ``ppo_token``: token-level GAE over each trajectory's action tokens, turn rewards placed on each
  turn's last action token, bootstrapping through the turns.
- ``fused``: a per-row mix of ``ppo_turn``'s critic advantage and a group parent's advantage
  (``policy.advantages.fused``), weighted by each baseline's estimated error variance or EVPO's switch.
- ``sppo``: sequence-level PPO, ``A = R - V`` with ``V = sigmoid(logit)`` the critic's value of the
  episode's first state, the same advantage on every turn of the episode.

Truncation is not termination: an episode that ``done`` ended bootstraps 0; one cut off by the turn
cap bootstraps from the critic's value of its last next-observation (``bootstrap``). The group
estimators (grpo, drgrpo, gigpo, hgpo) leave imagined episodes that were cut off (an uncertainty
halt, the imagination horizon, a turn cap) out of their group statistics and give their rows
advantage 0 (``policy.advantages.cut_episodes`` says why); real episodes are scored as they ended.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from critic import gae
from envs.trajectory import Trajectory
from policy.advantages import (
    GiGPOResult,
    StepRows,
    broadcast_to_tokens,
    gigpo_advantages,
    grpo_advantages,
    hgpo_advantages,
    sppo_advantages,
    whiten,
)
from policy.advantages.config import AlgoConfig
from policy.advantages.cut_episodes import on_scored_rows, scored_mask
from policy.advantages.fused import fuse, fused_critic_weights


@dataclass
class TurnRows:
    """Per-row (per-turn) fields of a batch, in the row order of the token batch."""

    trajectory_index: list[int]  # index into the trajectory list
    group_ids: torch.Tensor  # (N,) long
    traj_ids: torch.Tensor  # (N,) long
    steps: torch.Tensor  # (N,) long, turn index within its trajectory
    anchors: list[str]
    step_rewards: torch.Tensor  # (N,)
    episode_rewards: torch.Tensor  # (N,)
    scored: torch.Tensor | None = None  # (N,) bool: False on rows of cut imagined episodes; None: all scored

    def __len__(self) -> int:
        return len(self.anchors)

    def step_rows(self) -> StepRows:
        """The columns GiGPO and HGPO read."""
        return StepRows(
            self.group_ids, self.traj_ids, self.steps, self.anchors, self.step_rewards, self.episode_rewards
        )


def turn_rows(
    trajectories: Sequence[Trajectory], row_keys: Sequence[tuple[int, int]], *, invalid_action_penalty: float = 0.0
) -> TurnRows:
    """Rows for ``row_keys`` = (trajectory index, turn index) pairs, in that order.

    Each invalid turn's reward is lowered by ``invalid_action_penalty``, and so is its episode's
    score (the sum of the shaped turn rewards), so every estimator sees the same shaped rewards.
    """
    trajs = [trajectories[i] for i, _ in row_keys]
    turns = [trajectories[i].turns[t] for i, t in row_keys]

    def shaped(turn) -> float:
        return turn.reward - (0.0 if turn.valid else invalid_action_penalty)

    episode_scores = {id(tr): sum(shaped(turn) for turn in tr.turns) for tr in trajs}
    return TurnRows(
        trajectory_index=[i for i, _ in row_keys],
        group_ids=torch.tensor([tr.group_id for tr in trajs], dtype=torch.long),
        traj_ids=torch.tensor([tr.trajectory_id for tr in trajs], dtype=torch.long),
        steps=torch.tensor([t for _, t in row_keys], dtype=torch.long),
        anchors=[turn.anchor_observation for turn in turns],
        step_rewards=torch.tensor([shaped(turn) for turn in turns], dtype=torch.float32),
        episode_rewards=torch.tensor([episode_scores[id(tr)] for tr in trajs], dtype=torch.float32),
        scored=scored_mask(trajectories, [i for i, _ in row_keys]),
    )


def _grpo_rows(rows: TurnRows, cfg: AlgoConfig) -> torch.Tensor:
    if cfg.episode_stats == "rows":
        return grpo_advantages(rows.episode_rewards, rows.group_ids, norm_by_std=cfg.norm_by_std)
    # One value per trajectory, broadcast back to its rows.
    first_row: dict[int, int] = {}
    for row, traj in enumerate(rows.traj_ids.tolist()):
        first_row.setdefault(traj, row)
    firsts = torch.tensor(list(first_row.values()), dtype=torch.long)
    per_traj = grpo_advantages(rows.episode_rewards[firsts], rows.group_ids[firsts], norm_by_std=cfg.norm_by_std)
    lookup = dict(zip(first_row.keys(), per_traj.tolist(), strict=True))
    return torch.tensor([lookup[t] for t in rows.traj_ids.tolist()], dtype=torch.float32)


def _drgrpo_rows(rows: TurnRows, cfg: AlgoConfig) -> torch.Tensor:
    return _grpo_rows(rows, dataclasses.replace(cfg, norm_by_std=False))


def gigpo_of_rows(rows: TurnRows, cfg: AlgoConfig) -> GiGPOResult:
    """GiGPO's terms for ``rows`` with the ``algo.*`` options (gamma, omega, mode, episode_stats)."""
    return gigpo_advantages(
        rows.step_rows(), gamma=cfg.gamma, omega=cfg.omega, mode=cfg.mode, episode_stats=cfg.episode_stats
    )


def _gigpo_rows(rows: TurnRows, cfg: AlgoConfig) -> torch.Tensor:
    return gigpo_of_rows(rows, cfg).advantages


def _hgpo_rows(rows: TurnRows, cfg: AlgoConfig) -> torch.Tensor:
    result = hgpo_advantages(
        rows.step_rows(), gamma=cfg.gamma, K=cfg.history_levels, alpha=cfg.alpha, mode=cfg.mode,
        base_group=cfg.base_group,
    )
    return result.advantages


GROUP_ESTIMATORS = {"grpo": _grpo_rows, "drgrpo": _drgrpo_rows, "gigpo": _gigpo_rows, "hgpo": _hgpo_rows}


def group_baseline_token_advantages(cfg: AlgoConfig, rows: TurnRows, response_mask: torch.Tensor) -> torch.Tensor:
    """Critic-free estimators: one scalar per row, broadcast over its action tokens. (B, L)

    Rows whose ``scored`` is False (cut imagined episodes) take no part in any group and get 0.
    """
    return broadcast_to_tokens(on_scored_rows(GROUP_ESTIMATORS[cfg.name], rows, cfg), response_mask)  # (B, L)


def critic_token_advantages(
    cfg: AlgoConfig,
    rows: TurnRows,
    response_mask: torch.Tensor,
    values: torch.Tensor,
    *,
    bootstrap: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Critic-based advantages ``(B, L)`` (zero outside the action tokens) and the critic's targets.

    ``values`` and the returned targets are at the algorithm's value level:
    - ``ppo_turn``: ``(B,)`` the value of the state before each row's turn; targets ``(B,)``.
    - ``ppo_token``: ``(B, L)`` at action column ``l`` the value of the state before token ``l``;
      targets ``(B, L)``.
    - ``sppo``: ``(B,)`` the critic's logit on each row's state, of which each trajectory's first row
      is used; targets ``(B,)``: the episode score clipped to [0, 1] (the critic is a probability).
    ``bootstrap``: ``(B,)`` the value of the state after the row's trajectory ends, read on its last
    row: the critic's value there for a truncated episode, 0 for one that ended ``done`` (default 0).
    """
    if cfg.name == "fused":
        return fused_token_advantages(cfg, rows, response_mask, values, bootstrap=bootstrap)
    level = cfg.value_level
    if level is None:
        raise ValueError(f"{cfg.name} does not use a critic")
    expected = tuple(response_mask.shape) if level == "token" else (len(rows),)
    if tuple(values.shape) != expected:
        raise ValueError(f"{cfg.name} needs values of shape {expected}, got {tuple(values.shape)}")
    bootstrap = torch.zeros(len(rows)) if bootstrap is None else bootstrap.float()
    if level == "sequence":
        return _sppo_advantages(rows, response_mask, values)
    if level == "turn":
        # One entry per row: a row's single "token" in the flat sequence is its turn.
        seq_rewards, seq_values = rows.step_rewards.unsqueeze(1), values.float().unsqueeze(1)  # (B, 1)
        flat_adv, flat_ret = _gae_along_trajectories(
            rows, seq_rewards, seq_values, torch.ones_like(seq_rewards), bootstrap, cfg
        )
        advantages = flat_adv * response_mask  # (B, 1) * (B, L)
        returns = flat_ret.squeeze(1)  # (B,)
    else:
        mask = response_mask > 0  # (B, L)
        last_col = response_mask.shape[1] - 1 - mask.flip(1).float().argmax(dim=1)  # (B,)
        token_rewards = torch.zeros_like(values)
        token_rewards[torch.arange(len(rows)), last_col] = rows.step_rewards
        advantages, returns = _gae_along_trajectories(rows, token_rewards, values, response_mask, bootstrap, cfg)
    if cfg.whiten_advantages:
        advantages = whiten(advantages, response_mask) * response_mask
    return advantages, returns


def fused_token_advantages(
    cfg: AlgoConfig,
    rows: TurnRows,
    response_mask: torch.Tensor,
    values: torch.Tensor,
    *,
    bootstrap: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``algo=fused``: ``w * A_ppo_turn + (1 - w) * A_group`` per row (B, L), and the critic's (B,) targets.

    Both parents are computed exactly as their own algorithms compute them from the same ``cfg``; the
    critic's weight w per row comes from ``cfg.fused`` (``policy.advantages.fused.fused_critic_weights``),
    fed with the critic's lambda-returns and ``values``, and Monte-Carlo returns-to-go (GAE with lambda = 1,
    bootstrapped at truncations) for the start-state return variance.
    """
    critic_adv, targets = critic_token_advantages(
        dataclasses.replace(cfg, name="ppo_turn"), rows, response_mask, values, bootstrap=bootstrap
    )  # (B, L), (B,)
    group_adv = group_baseline_token_advantages(dataclasses.replace(cfg, name=cfg.fused.group), rows, response_mask)
    bootstrap = torch.zeros(len(rows)) if bootstrap is None else bootstrap.float()
    column = values.float().unsqueeze(1)  # (B, 1): one entry per turn
    _, mc_returns = _gae_along_trajectories(rows, rows.step_rewards.unsqueeze(1), column, torch.ones_like(column),
                                            bootstrap, dataclasses.replace(cfg, lam=1.0))  # (B, 1)
    weights = fused_critic_weights(
        cfg.fused, critic_returns=targets, values=values, mc_returns=mc_returns.squeeze(1),
        scores=rows.episode_rewards, group_ids=rows.group_ids, traj_ids=rows.traj_ids, levels=rows.steps,
        start_rows=first_rows_mask(rows).bool(), centre_critic=cfg.whiten_advantages,
    )  # (B,)
    return fuse(critic_adv, group_adv, weights), targets


def _sppo_advantages(
    rows: TurnRows, response_mask: torch.Tensor, logits: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``A = R - sigmoid(logit of the episode's first row)`` on every row of the episode; targets clip R to [0, 1]."""
    first_row: dict[int, int] = {}
    for row in sorted(range(len(rows)), key=lambda r: (int(rows.traj_ids[r]), int(rows.steps[r]))):
        first_row.setdefault(int(rows.traj_ids[row]), row)
    first = torch.tensor([first_row[int(t)] for t in rows.traj_ids.tolist()], dtype=torch.long)  # (B,)
    per_row = sppo_advantages(rows.episode_rewards, logits.float()[first])  # (B,)
    return broadcast_to_tokens(per_row, response_mask), rows.episode_rewards.clamp(0.0, 1.0)


def first_rows_mask(rows: TurnRows) -> torch.Tensor:
    """(B,) float, 1 on each trajectory's earliest row in the batch: where SPPO's critic is trained."""
    first: dict[int, tuple[int, int]] = {}
    for row, (traj, step) in enumerate(zip(rows.traj_ids.tolist(), rows.steps.tolist(), strict=True)):
        if traj not in first or step < first[traj][0]:
            first[traj] = (step, row)
    mask = torch.zeros(len(rows))
    mask[[row for _, row in first.values()]] = 1.0
    return mask


def _gae_along_trajectories(
    rows: TurnRows,
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    bootstrap: torch.Tensor,
    cfg: AlgoConfig,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run GAE over each trajectory's rows concatenated in time order, bootstrapping after its last
    row with ``bootstrap`` (B,) of that row; scatter back to (B, L)."""
    by_traj: dict[int, list[int]] = {}
    for row in sorted(range(len(rows)), key=lambda r: (rows.traj_ids[r].item(), rows.steps[r].item())):
        by_traj.setdefault(int(rows.traj_ids[row]), []).append(row)
    advantages = torch.zeros_like(rewards)
    returns = torch.zeros_like(rewards)
    for row_list in by_traj.values():
        index = torch.tensor(row_list)
        seq_r = rewards[index].reshape(1, -1)  # (1, R * L)
        seq_v = values[index].reshape(1, -1)
        seq_m = mask[index].reshape(1, -1).float()
        end_value = bootstrap[index[-1:]]  # (1,)
        adv, ret = gae(seq_r, seq_v, seq_m, gamma=cfg.gamma, lam=cfg.lam, bootstrap=end_value)
        advantages[index] = adv.reshape(len(row_list), -1) * mask[index]
        returns[index] = ret.reshape(len(row_list), -1) * mask[index]
    return advantages, returns
