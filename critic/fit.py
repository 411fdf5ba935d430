"""Fitting any ``TurnCritic`` on fixed data: the states, their return targets, a regression loop, a score.

Small pure pieces, usable outside the RL loop (benchmarks, a critic fitted on another agent's data):

- ``turn_states(trajectories, include_end=...)``: the ``(trajectory, k)`` state of every turn, in
  trajectory order then ``k = 0 .. num_turns - 1`` (and ``k = num_turns``, the state after the last
  turn, with ``include_end``); ``history_states`` wraps them as ``CriticStates`` for a critic that
  reads only the histories (``LatentCritic``), with one dummy prompt id per row. A critic that reads
  prompt ids (``TokenCritic``) needs the policy's rendering: ``LMPolicy.state_prompts(turn_states(...))``.
- ``lambda_returns(trajectories, values, gamma=, lam=)``: lambda-returns per turn state through
  ``critic.targets.gae`` (0 after a ``done`` episode, the value of the state after the last turn
  after a truncated one); with ``lam = 1`` and no values, Monte-Carlo discounted returns.
- ``fit_turn_critic(critic, states, targets, ...)``: MSE regression with AdamW on seeded minibatches.
- ``explained_variance(pred, target)`` and ``mse(pred, target)``: held-out scores.

``explained_variance`` here is the unmasked form of ``policy.losses.explained_variance`` (the same
definition; ``critic`` may not import ``policy``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from tqdm import tqdm

from critic.base import CriticStates, TurnCritic
from critic.targets import gae
from envs.trajectory import Trajectory


def turn_states(trajectories: Sequence[Trajectory], *, include_end: bool = False) -> list[tuple[Trajectory, int]]:
    """``(trajectory, k)`` for every turn state: per trajectory ``k = 0 .. num_turns - 1``, then
    ``k = num_turns`` when ``include_end``. Trajectories without turns are refused (``ValueError``)."""
    states = []
    for trajectory in trajectories:
        if trajectory.num_turns == 0:
            raise ValueError(f"trajectory {trajectory.trajectory_id} has no turns, so no state to value")
        last = trajectory.num_turns + (1 if include_end else 0)
        states.extend((trajectory, k) for k in range(last))
    return states


def history_states(trajectories: Sequence[Trajectory], *, include_end: bool = False) -> CriticStates:
    """``CriticStates`` of ``turn_states`` for a critic that reads histories only.

    The prompt ids are a placeholder, one id 0 per row (mask 1): a critic that reads them
    (``TokenCritic``) would value nothing meaningful, so build its states with
    ``LMPolicy.state_prompts(turn_states(...))`` instead.
    """
    states = turn_states(trajectories, include_end=include_end)
    ids = torch.zeros((len(states), 1), dtype=torch.long)  # (N, 1)
    return CriticStates(ids, torch.ones_like(ids), states)


def lambda_returns(
    trajectories: Sequence[Trajectory],
    values: torch.Tensor | None = None,
    *,
    gamma: float = 1.0,
    lam: float = 1.0,
    invalid_penalty: float = 0.0,
) -> torch.Tensor:
    """``(M,)`` lambda-returns, one per turn state in ``turn_states(trajectories)`` order.

    ``values``: ``(N,)`` critic values in ``turn_states(trajectories, include_end=True)`` order, i.e.
    ``num_turns + 1`` per trajectory; the last one of each (the state after its last turn) is read
    only for a truncated trajectory, as its bootstrap. An episode that ended ``done`` bootstraps 0.
    ``values=None`` means Monte-Carlo returns ``G_t = sum_j gamma^j r_{t+j}``; it needs ``lam = 1``
    and no truncated trajectory (there is nothing to bootstrap with).

    The reward of a turn is ``turn.reward - invalid_penalty * [turn not valid]`` (the shaped reward
    of ``docs/conventions.md`` when ``invalid_penalty`` is ``AlgoConfig.invalid_action_penalty``).
    The recursion is ``critic.targets.gae``: ``returns = advantages + values``.
    """
    if not 0.0 <= gamma <= 1.0 or not 0.0 <= lam <= 1.0:
        raise ValueError(f"gamma and lam must be in [0, 1], got gamma={gamma}, lam={lam}")
    if not trajectories:
        return torch.zeros(0)
    lengths = [t.num_turns for t in trajectories]
    if min(lengths) == 0:
        raise ValueError("every trajectory needs at least one turn")
    if values is None:
        if lam != 1.0:
            raise ValueError(f"lam={lam} < 1 mixes in the critic's values: pass values")
        truncated = [t.trajectory_id for t in trajectories if t.truncated]
        if truncated:
            raise ValueError(f"trajectories {truncated} are truncated: pass values to bootstrap them")
        values = torch.zeros(sum(lengths) + len(lengths))
    values = values.detach().float().cpu()
    if values.shape != (sum(lengths) + len(lengths),):
        raise ValueError(
            f"values must be ({sum(lengths) + len(lengths)},): num_turns + 1 per trajectory, got {tuple(values.shape)}"
        )
    batch, width = len(trajectories), max(lengths)
    rewards = torch.zeros(batch, width)  # (B, T)
    padded = torch.zeros(batch, width)  # (B, T)
    mask = torch.zeros(batch, width)  # (B, T)
    bootstrap = torch.zeros(batch)  # (B,)
    start = 0
    for b, (trajectory, n) in enumerate(zip(trajectories, lengths, strict=True)):
        rewards[b, :n] = torch.tensor(
            [t.reward - (0.0 if t.valid else invalid_penalty) for t in trajectory.turns], dtype=torch.float
        )
        padded[b, :n] = values[start : start + n]
        mask[b, :n] = 1.0
        if trajectory.truncated:
            bootstrap[b] = values[start + n]
        start += n + 1
    _, returns = gae(rewards, padded, mask, gamma=gamma, lam=lam, bootstrap=bootstrap)  # (B, T)
    return returns[mask.bool()]  # (M,) row-major: trajectory order, then turn order


def explained_variance(pred: torch.Tensor, target: torch.Tensor) -> float:
    """``1 - Var[target - pred] / Var[target]`` (population variances) over all entries.

    1 is a perfect fit, 0 no better than the targets' mean, negative worse. 0 when ``Var[target]``
    is 0 (constant targets, one entry or none), never NaN.
    """
    pred, target = pred.detach().double().flatten(), target.detach().double().flatten()
    if pred.shape != target.shape:
        raise ValueError(f"pred {tuple(pred.shape)} and target {tuple(target.shape)} differ in size")
    if target.numel() == 0:
        return 0.0
    var_target = target.var(unbiased=False)
    if var_target <= 0:
        return 0.0
    return float(1.0 - (target - pred).var(unbiased=False) / var_target)


def mse(pred: torch.Tensor, target: torch.Tensor) -> float:
    """Mean squared error over all entries (NaN for none)."""
    pred, target = pred.detach().double().flatten(), target.detach().double().flatten()
    if pred.shape != target.shape:
        raise ValueError(f"pred {tuple(pred.shape)} and target {tuple(target.shape)} differ in size")
    return float((pred - target).square().mean()) if target.numel() else math.nan


@torch.no_grad()
def predict(critic: TurnCritic, states: CriticStates, *, batch_size: int = 256) -> torch.Tensor:
    """``(N,)`` values of ``states`` on the CPU, in eval mode and chunks of ``batch_size`` rows;
    the critic's train/eval mode is restored afterwards."""
    was_training = critic.training
    critic.eval()
    device = next(critic.parameters()).device
    try:
        chunks = [
            critic(states.index(torch.arange(i, min(i + batch_size, len(states)))).to(device)).float().cpu()
            for i in range(0, len(states), batch_size)
        ]
    finally:
        critic.train(was_training)
    return torch.cat(chunks) if chunks else torch.zeros(0)


def fit_turn_critic(
    critic: TurnCritic,
    states: CriticStates,
    targets: torch.Tensor,
    *,
    steps: int,
    batch_size: int = 64,
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    seed: int = 0,
    progress: bool = False,
) -> list[float]:
    """Fit ``critic`` in place by MSE to ``targets`` ((N,), one per state); return the ``steps`` losses.

    Each step takes ``batch_size`` rows (all of them when fewer) without replacement from a
    permutation drawn by a ``torch.Generator`` seeded with ``seed``; a new permutation starts when
    one runs out. The optimiser is a fresh AdamW. The loop runs inside ``torch.random.fork_rng``
    seeded with ``seed`` (dropout, if any), so the caller's global RNG is unchanged and the same
    seed gives the same weights. The critic is left in eval mode.
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be an integer >= 0, got {steps!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr!r}")
    targets = targets.detach().float().flatten()
    if targets.shape[0] != len(states):
        raise ValueError(f"{targets.shape[0]} targets for {len(states)} states")
    if len(states) == 0 and steps > 0:
        raise ValueError("no states to fit on")
    device = next(critic.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(critic.parameters(), lr=lr, weight_decay=weight_decay)
    size = min(batch_size, len(states))
    order, used = torch.randperm(len(states), generator=generator), 0
    losses: list[float] = []
    critic.train()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for _ in tqdm(range(steps), desc="critic", disable=not progress):
            if used + size > len(order):
                order, used = torch.randperm(len(states), generator=generator), 0
            rows = order[used : used + size]  # (b,)
            used += size
            pred = critic(states.index(rows).to(device))  # (b,)
            loss = (pred.float() - targets[rows].to(device)).square().mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
    critic.eval()
    return losses
