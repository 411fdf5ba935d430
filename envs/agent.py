"""The agent side of the rollout contract: what an agent sees and the batched ``act`` it offers."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from envs.base import Env
from envs.trajectory import Turn


@dataclass
class AgentView:
    """Everything an agent may look at before its next action.

    ``env`` is there for scripted agents (expert, random); a learned policy reads only
    ``turns`` and ``observation``.
    """

    env: Env
    turns: list[Turn]  # the episode so far, oldest first
    observation: str  # the current observation, shown before acting


@runtime_checkable
class Agent(Protocol):
    def act(self, views: Sequence[AgentView]) -> list[str]:
        """Return one action text per view, in order."""
        ...


class ExpertAgent:
    """Plays each env's scripted expert."""

    def act(self, views: Sequence[AgentView]) -> list[str]:
        return [view.env.expert_action() for view in views]


class RandomAgent:
    """Plays a uniformly random well-formed action, from its own seeded RNG."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)

    def act(self, views: Sequence[AgentView]) -> list[str]:
        return [view.env.random_action(self.rng) for view in views]
