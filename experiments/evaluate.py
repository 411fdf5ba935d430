"""Evaluate an agent on given env seeds (held-out tasks, from ``envs.split_seeds``): success, return, length."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from envs.agent import Agent
from envs.collect import collect
from envs.trajectory import Trajectory


@dataclass
class Evaluation:
    success_rate: float
    episodic_return: float
    episode_length: float
    invalid_action_rate: float
    env_steps: int

    def as_metrics(self, prefix: str) -> dict[str, float]:
        return {
            f"{prefix}/success_rate": self.success_rate,
            f"{prefix}/episodic_return": self.episodic_return,
            f"{prefix}/episode_length": self.episode_length,
            f"{prefix}/invalid_action_rate": self.invalid_action_rate,
        }


def summarise(trajectories: list[Trajectory]) -> Evaluation:
    """Success, mean return, mean length and invalid-action rate of a set of episodes."""
    n = max(len(trajectories), 1)
    turns = [turn for traj in trajectories for turn in traj.turns]
    return Evaluation(
        success_rate=sum(t.success for t in trajectories) / n,
        episodic_return=sum(t.episode_return for t in trajectories) / n,
        episode_length=len(turns) / n,
        invalid_action_rate=sum(not turn.valid for turn in turns) / max(len(turns), 1),
        env_steps=len(turns),
    )


def evaluate(
    agent: Agent, env_name: str, env_kwargs: dict[str, Any] | None = None, *, seeds: Sequence[int],
    max_turns: int | None = None, progress: bool = False,
) -> Evaluation:
    """One independent episode (a group of one) per env seed in ``seeds``."""
    trajectories = collect(
        agent, env_name, env_kwargs=env_kwargs, group_size=1, group_seeds=list(seeds),
        max_turns=max_turns, progress=progress,
    )
    return summarise(trajectories)
