"""A fixed mix of scripted agents, for data that covers both good and bad play.

``NoisyExpertAgent`` plays the env's scripted expert with a given probability, else a random action;
``collect_mix`` collects one episode per seed, cycling a random agent, the expert and the noisy
expert, so the return from a state depends on who is playing. Fitting data for critics and world
models outside the RL loop (``benchmarks.critic_quality``, ``experiments.reuse_critic``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from envs.agent import AgentView, ExpertAgent, RandomAgent
from envs.collect import collect
from envs.splits import split_seeds
from envs.trajectory import Trajectory

AGENT_NAMES = ("random", "expert", "noisy_expert")


class NoisyExpertAgent:
    """The env's scripted expert with probability ``expert_probability``, else a random action."""

    def __init__(self, expert_probability: float = 0.5, seed: int = 0) -> None:
        if not 0.0 <= expert_probability <= 1.0:
            raise ValueError(f"expert_probability must be in [0, 1], got {expert_probability}")
        self.expert_probability = expert_probability
        self.rng = random.Random(seed)

    def act(self, views: Sequence[AgentView]) -> list[str]:
        return [
            view.env.expert_action() if self.rng.random() < self.expert_probability else view.env.random_action(self.rng)
            for view in views
        ]


def collect_mix(
    env_name: str, env_kwargs: dict[str, Any], split: str, episodes: int, *, seed: int = 0
) -> list[Trajectory]:
    """``episodes`` episodes on ``split`` seeds, one per seed, the agents of ``AGENT_NAMES`` in turn.

    Returned in seed order, with unique trajectory ids; each trajectory's group id is its agent's
    index in ``AGENT_NAMES``.
    """
    seeds = split_seeds(env_name, env_kwargs, split, seed=seed, count=episodes)
    agents = (RandomAgent(seed=seed), ExpertAgent(), NoisyExpertAgent(seed=seed))
    by_agent = [
        collect(agent, env_name, group_size=1, group_seeds=seeds[a :: len(agents)], env_kwargs=env_kwargs,
                progress=False)
        for a, agent in enumerate(agents)
    ]
    trajectories = []
    for i, env_seed in enumerate(seeds):
        a = i % len(agents)
        t = by_agent[a][i // len(agents)]
        assert t.seed == env_seed
        t.trajectory_id, t.group_id = i, a
        trajectories.append(t)
    return trajectories
