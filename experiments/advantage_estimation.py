"""5. Advantages: the update's batch of sampled turns, its token advantages and the critic's targets."""

from __future__ import annotations

import dataclasses

import torch

from envs import Trajectory
from experiments.build import RunParts
from experiments.distributed import broadcast_module_
from imagination.imagine import ImaginedGroups
from imagination.value_expansion import expanded_returns
from policy.advantages.algorithms import (
    TurnRows,
    critic_token_advantages,
    first_rows_mask,
    group_baseline_token_advantages,
    turn_rows,
)
from policy.advantages.config import AlgoConfig
from policy.learner import PPOLearner
from policy.lm_policy import LMPolicy
from policy.rollout_batch import RolloutBatch, build_rollout_batch
from policy.value_targets import ValueTargets

CHUNK_ROWS = 256  # rows per no-grad forward pass when scoring a batch


def estimate_advantages(
    parts: RunParts, iteration: int, trajectories: list[Trajectory], weights: list[float], imagined: ImaginedGroups,
    *, gate_open: bool,
) -> tuple[RolloutBatch, torch.Tensor, ValueTargets | None, dict[str, float]]:
    """5. Advantages: one row per sampled turn, trained on exactly the sampled ids. Returns the batch
    (the counterfactual algorithms may add rows), its token advantages, the critic's targets (None
    without a critic) and the counterfactual algorithms' figures (``oracle/env_steps``: the real env
    steps of ``real_branch_gigpo``'s branches, for the loop to count)."""
    algo, policy, learner, counterfactual = parts.run.algo, parts.policy, parts.learner, parts.counterfactual
    batch = build_rollout_batch(trajectories, pad_id=policy.pad_token_id, weights=weights)
    rows = turn_rows(batch.trajectories, batch.row_keys, invalid_action_penalty=algo.invalid_action_penalty)
    value, counterfactual_metrics = None, {}
    if counterfactual is not None:
        batch, advantages, counterfactual_metrics = counterfactual.advantages(
            policy, batch, iteration=iteration, gate_open=gate_open)
        if counterfactual.critic is not None:  # fitted alike on every rank; rank 0's weights rule
            broadcast_module_(parts.fabric, counterfactual.critic)
    elif parts.critic is None:
        advantages = group_baseline_token_advantages(algo, rows, batch.tokens.response_mask)
    else:
        advantages, value = critic_advantages(algo, learner, policy, batch, rows)
        if parts.run.imagination.mode == "value_expansion" and imagined.trajectories:  # MVE targets on real rows
            value = dataclasses.replace(value, returns=expanded_returns(
                value.returns, batch.row_keys, batch.trajectories, imagined, gamma=algo.gamma,
                invalid_action_penalty=algo.invalid_action_penalty,
                end_values=lambda states: learner.critic_values(policy.state_prompts(states), CHUNK_ROWS).cpu()))
    return batch, advantages, value, counterfactual_metrics


def critic_advantages(
    algo: AlgoConfig, learner: PPOLearner, policy: LMPolicy, batch: RolloutBatch, rows: TurnRows
) -> tuple[torch.Tensor, ValueTargets]:
    """Critic-based advantages and the critic's targets, bootstrapping truncated episodes.

    The critic values each row's state before the turn (``token`` level: before each action token),
    and, for an episode cut off by the turn cap, the state after its last turn.
    """
    states = batch.critic_states()
    truncated = [(i, trajectory) for i, trajectory in enumerate(batch.trajectories) if trajectory.truncated]
    bootstrap = torch.zeros(len(batch))  # (B,) read on each trajectory's last row
    if truncated and algo.value_level != "sequence":
        ends = policy.state_prompts([(trajectory, trajectory.num_turns) for _, trajectory in truncated])
        end_values = learner.critic_values(ends, CHUNK_ROWS).cpu()  # (T,)
        value_of = {i: float(v) for (i, _), v in zip(truncated, end_values, strict=True)}
        bootstrap = torch.tensor([value_of.get(i, 0.0) for i, _ in batch.row_keys])
    if algo.value_level == "token":
        old_values = learner.critic_token_values(batch.tokens, CHUNK_ROWS).cpu()  # (B, L)
    else:
        old_values = learner.critic_values(states, CHUNK_ROWS).cpu()  # (B,) values, or logits for sppo
    advantages, returns = critic_token_advantages(algo, rows, batch.tokens.response_mask, old_values,
                                                  bootstrap=bootstrap)
    if algo.value_level == "sequence":
        return advantages, ValueTargets("sequence", returns, states=states, mask=first_rows_mask(rows))
    return advantages, ValueTargets(algo.value_level, returns, old_values=old_values,
                                    states=None if algo.value_level == "token" else states)
