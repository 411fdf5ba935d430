"""Imagined groups: the policy plays inside the world model from real branch points.

Each branch point ``(real trajectory, k)`` starts one group of ``group_size`` imagined episodes, so
GRPO, GiGPO and HGPO compare the members of a group as they compare real ones: the same start
state, different sampled actions and outcomes. The episodes are collected with ``envs.collect``
through ``DreamEnv``s, exactly as real ones are, and come back as ordinary ``Trajectory`` records
with ``source="imagined"`` and the real prefix copied (``branch_turn = k``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from envs.agent import Agent
from envs.collect import collect
from envs.trajectory import Trajectory
from imagination.config import ImaginationConfig
from imagination.dream_env import DreamEnvFactory
from world_model.protocol import WorldModelLike


@dataclass
class ImaginedGroups:
    trajectories: list[Trajectory]
    """Every imagined episode, group by group, in trajectory-id order."""
    groups: list[list[Trajectory]]
    """``groups[g]``: the episodes started from ``branches[g]``."""
    branches: list[tuple[Trajectory, int]]
    """The real branch points, one per group."""
    halted: int = 0
    """Episodes stopped because the model was too unsure (``imagination.halt_uncertainty``)."""

    @property
    def halted_share(self) -> float:
        """Share of imagined episodes that were halted (NaN when there were none)."""
        return self.halted / len(self.trajectories) if self.trajectories else float("nan")


def imagine_groups(
    agent: Agent,
    world_model: WorldModelLike,
    env_name: str,
    env_kwargs: dict[str, Any],
    branches: Sequence[tuple[Trajectory, int]],
    *,
    group_size: int,
    config: ImaginationConfig,
    seed: int,
    max_turns: int | None = None,
    first_group_id: int = 0,
    first_trajectory_id: int = 0,
    success_reward: float | None = None,
) -> ImaginedGroups:
    """One imagined group of ``group_size`` episodes per branch point.

    ``seed`` seeds the world model's sampling for this call (the agent samples from its own
    stream); the config's ``horizon``, ``reward_penalty`` and ``halt_uncertainty`` go to every
    ``DreamEnv``; ``max_turns`` caps each episode as in ``collect`` (the real prefix counts);
    ``success_reward``: the model reward above which a done step is a success (None: the env's rule).
    """
    branches = list(branches)
    if not branches:
        return ImaginedGroups([], [], [])
    factory = DreamEnvFactory(
        world_model, env_name, env_kwargs, seed=seed, horizon=config.horizon, reward_penalty=config.reward_penalty,
        halt_uncertainty=config.halt_uncertainty, success_reward=success_reward,
    )
    built = []  # every DreamEnv of the call, to read how each episode ended

    def make_env():
        built.append(factory())
        return built[-1]

    trajectories = collect(
        agent, make_env, env_kwargs=env_kwargs, group_size=group_size, branches=branches, max_turns=max_turns,
        source="imagined", first_group_id=first_group_id, first_trajectory_id=first_trajectory_id, progress=False,
    )
    groups = [trajectories[g * group_size : (g + 1) * group_size] for g in range(len(branches))]
    halted = sum(bool(env.last_info.get("halted", False)) for env in built)
    return ImaginedGroups(trajectories, groups, branches, halted)
