"""Model-based value expansion (MVE, Feinberg et al. 2018) for a turn-level critic.

With ``imagination.mode=value_expansion`` imagined turns never enter the policy loss: the update's
rows are the real turns alone, and imagination only changes what the critic is trained toward on
those real states. For a real turn ``t`` (state ``s_t``, shaped reward ``r_t``) whose episode went
on, the world model plays ``K`` continuations from the real next state ``s_{t+1}`` (each capped by
``imagination.horizon`` imagined turns, bootstrapped with the critic where cut), and

    target(s_t) = r_t + gamma * mean_k [ sum_i gamma^i r^k_i  +  gamma^(h_k) V(s^k_end) * [cut_k] ]

The first transition is the real one (as in MVE), so a wrong model can only bias what comes after
it. A real turn that ended its episode keeps its ordinary return (``r_t``, or ``r_t + gamma V`` when
truncated): there is nothing to imagine. The policy's advantages on the real rows come from the
critic as usual (GAE over the real rewards).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import torch

from envs.trajectory import Trajectory
from imagination.branching import branchable_turns
from imagination.imagine import ImaginedGroups


def discounted_return(rewards: Sequence[float], end_value: float, gamma: float) -> float:
    """``sum_i gamma^i rewards[i] + gamma^len(rewards) * end_value`` (pass ``end_value=0`` at a real end)."""
    total = 0.0
    for reward in reversed(list(rewards)):
        total = reward + gamma * total
    return total + gamma ** len(rewards) * end_value


def expansion_target(first_reward: float, continuation_returns: Sequence[float], gamma: float) -> float:
    """``first_reward + gamma * mean(continuation_returns)``: the real turn, then the model's expected rest."""
    if not continuation_returns:
        raise ValueError("expansion_target needs at least one imagined continuation")
    return first_reward + gamma * sum(continuation_returns) / len(continuation_returns)


def expansion_branches(trajectories: Sequence[Trajectory]) -> list[tuple[Trajectory, int]]:
    """Every real state ``(trajectory, t + 1)`` that follows a trained real turn ``t`` that did not end it."""
    return [
        (trajectory, k)
        for trajectory in trajectories
        for k in branchable_turns(trajectory)
        if k > trajectory.branch_turn
    ]


def plan_expansion(
    branches: Sequence[tuple[Trajectory, int]], budget: int, rng: random.Random
) -> tuple[list[tuple[Trajectory, int]], int]:
    """``(branches, K)``: K continuations per branch so that at most ``budget`` episodes are imagined.

    With more branches than ``budget``, ``budget`` of them are drawn (in their original order) and
    K is 1; the rows left without a continuation keep their ordinary targets.
    """
    if budget < 1:
        raise ValueError(f"plan_expansion: budget must be >= 1, got {budget}")
    branches = list(branches)
    if not branches:
        return [], 0
    if len(branches) > budget:
        keep = sorted(rng.sample(range(len(branches)), budget))
        return [branches[i] for i in keep], 1
    return branches, budget // len(branches)


def expanded_returns(
    returns: torch.Tensor,
    row_keys: Sequence[tuple[int, int]],
    trajectories: Sequence[Trajectory],
    imagined: ImaginedGroups,
    *,
    end_values: Callable[[list[tuple[Trajectory, int]]], torch.Tensor],
    gamma: float,
    invalid_action_penalty: float,
) -> torch.Tensor:
    """The critic's (B,) targets on real rows: MVE targets where the model continued the row's episode.

    ``returns``: (B,) the ordinary targets of the real rows (kept where no continuation exists);
    ``row_keys``: per row (index into ``trajectories``, turn); ``imagined``: groups of episodes, group
    ``g`` branched at ``imagined.branches[g] = (real trajectory, t + 1)`` (``expansion_branches``);
    ``end_values(states)``: (N,) the critic's values of ``(trajectory, num_turns)`` states, for
    continuations cut before the episode ended. Rewards are shaped as ``turn_rows`` shapes them.
    """
    if returns.shape != (len(row_keys),):
        raise ValueError(f"returns {tuple(returns.shape)} must be ({len(row_keys)},), one per row")

    def shaped(turn) -> float:
        return turn.reward - (0.0 if turn.valid else invalid_action_penalty)

    cut = [t for t in imagined.trajectories if t.truncated]
    cut_values = end_values([(t, t.num_turns) for t in cut]).tolist() if cut else []  # (N,)
    value_at_end = {t.trajectory_id: v for t, v in zip(cut, cut_values, strict=True)}
    continuations: dict[tuple[int, int], list[float]] = {}  # (real trajectory id, k) -> returns from k
    for (real, k), group in zip(imagined.branches, imagined.groups, strict=True):
        for episode in group:
            rest = [shaped(turn) for turn in episode.turns[k:]]
            continuations.setdefault((real.trajectory_id, k), []).append(
                discounted_return(rest, value_at_end.get(episode.trajectory_id, 0.0), gamma)
            )
    targets = returns.clone().float()  # (B,)
    for row, (index, turn) in enumerate(row_keys):
        trajectory = trajectories[index]
        found = continuations.get((trajectory.trajectory_id, turn + 1))
        if found:
            targets[row] = expansion_target(shaped(trajectory.turns[turn]), found, gamma)
    return targets


def check_value_expansion(
    mode: str, enabled: bool, algo_name: str, value_level: str | None, warmup_iterations: int
) -> None:
    """Refuse settings where value expansion has no meaning: no turn-level critic, or iterations with no real turn."""
    if mode != "value_expansion" or not enabled:
        return
    if value_level != "turn":
        raise ValueError(
            f"imagination.mode=value_expansion expands a turn-level critic's targets: use algo=ppo_turn "
            f"or algo=fused (algo={algo_name} has {'no critic' if value_level is None else f'a {value_level}-level critic'})"
        )
    if warmup_iterations:
        raise ValueError(
            "imagination.mode=value_expansion trains the policy on real turns only, so the fully imagined "
            "iterations of imagination.warmup_iterations would train nothing: set it to 0"
        )


def policy_batch(
    real: Sequence[Trajectory], imagined: Sequence[Trajectory], *, mode: str, imagined_weight: float
) -> tuple[list[Trajectory], list[float] | None]:
    """The trajectories of the update's rows and their policy-loss weights (None: all 1).

    ``policy`` mode: real then imagined episodes, imagined ones weighing ``imagined_weight``.
    ``value_expansion``: the real episodes alone. Imagined rows kept at weight 0 would still count
    in the ``token-mean`` denominator and in advantage whitening, and under Adam a minibatch's step
    has the same size whatever share of it is real, so each real row would move the policy several
    times as far: imagined episodes stay out of the batch instead.
    """
    if mode == "value_expansion" or not imagined:
        return list(real), None
    return list(real) + list(imagined), [1.0] * len(real) + [imagined_weight] * len(imagined)
