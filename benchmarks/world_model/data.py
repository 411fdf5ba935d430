"""The benchmark's envs and data: which env is scored how, trajectory pools, revisited pages."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from envs.agent import ExpertAgent, RandomAgent
from envs.collect import collect
from envs.splits import split_seeds
from envs.trajectory import Trajectory

Kind = Literal["deterministic", "bayes", "slippery", "shop"]
Policy = Literal["random", "expert"]


@dataclass(frozen=True)
class EnvSpec:
    """One benchmarked env: registry name, options and how it is scored."""

    name: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    kind: Kind = "deterministic"
    """``deterministic``: exact match and open loop; ``bayes``: NLL vs the exact Bayes predictive;
    ``slippery``: NLL vs the exact slip distribution; ``shop``: NLL and revisited pages."""
    reward_tolerance: float = 0.5
    """A predicted reward counts as right within this of the real one (half the gap between rewards)."""


ENVS: dict[str, EnvSpec] = {
    "hidden_number": EnvSpec("hidden_number", {}, "bayes"),
    "hidden_number_noisy": EnvSpec("hidden_number", {"noise": 0.1}, "bayes"),
    "frozen_lake": EnvSpec("frozen_lake", {"size": 4, "is_slippery": False}, "deterministic"),
    "frozen_lake_slippery": EnvSpec("frozen_lake", {"size": 4, "is_slippery": True}, "slippery"),
    "sokoban": EnvSpec("sokoban", {}, "deterministic"),
    "minishop": EnvSpec("minishop", {}, "shop", reward_tolerance=0.1),  # rewards are fifths
}
KINDS_WITH_SHIFT: tuple[Kind, ...] = ("deterministic", "shop")
"""Kinds where a wrong greedy prediction is the model's fault, so disagreement should flag it."""


def collect_pool(
    env: str, split: str, transitions: int, *, seed: int = 0, policies: Sequence[Policy] = ("random", "expert")
) -> list[Trajectory]:
    """Episodes on ``split`` seeds until at least ``transitions`` turns, one per seed, the seeds
    handed round-robin to ``policies`` (random, expert, random, ...)."""
    spec = ENVS[env]
    return collect_env_pool(spec.name, spec.kwargs, split, transitions, seed=seed, policies=policies)


def collect_env_pool(
    name: str, kwargs: dict[str, Any], split: str, transitions: int, *, seed: int = 0,
    policies: Sequence[Policy] = ("random", "expert"),
) -> list[Trajectory]:
    """``collect_pool`` for any registered env ``name`` with its ``kwargs`` (an env preset's)."""
    pool: list[Trajectory] = []
    count, batch, used = 0, max(4, transitions // 3), 0
    while count < transitions:
        seeds = split_seeds(name, kwargs, split, seed=seed, count=used + batch)[used:]
        used += len(seeds)
        parts = []
        for p, policy in enumerate(policies):
            agent = RandomAgent(seed=seed + used) if policy == "random" else ExpertAgent()
            parts.append(collect(agent, name, group_size=1, group_seeds=seeds[p :: len(policies)],
                                 env_kwargs=kwargs, progress=False))
        for i, seed_ in enumerate(seeds):
            t = parts[i % len(policies)][i // len(policies)]
            assert t.seed == seed_
            pool.append(t)
            count += t.num_turns
            if count >= transitions:
                break
    return pool


def prefix(pool: Sequence[Trajectory], transitions: int) -> list[Trajectory]:
    """The shortest prefix of whole trajectories with at least ``transitions`` turns."""
    out, count = [], 0
    for t in pool:
        if count >= transitions:
            break
        out.append(t)
        count += t.num_turns
    return out


def revisits(trajectory: Trajectory) -> list[bool]:
    """Per turn: the next observation exactly equals one the episode has already shown (its first
    observation or an earlier turn's next observation), e.g. back to the search page."""
    seen = {trajectory.turns[0].observation} if trajectory.turns else set()
    out = []
    for turn in trajectory.turns:
        out.append(turn.next_observation in seen)
        seen.add(turn.next_observation)
    return out
