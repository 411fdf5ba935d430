"""The agent side of the rollout contract: what an agent sees and the batched ``act`` it offers.

An agent answers each view with the action text, or, when it is a token-level policy, with the
``SampledAction`` it drew (text plus the exact prompt ids, action ids and log-probs), which
``collect`` keeps on the turn so training never re-tokenises text.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from envs.base import Env
from envs.trajectory import SampledAction, Turn

__all__ = ["Agent", "AgentView", "ExpertAgent", "RandomAgent", "SampledAction"]


@dataclass
class AgentView:
    """Everything an agent may look at before its next action.

    ``env`` is there for scripted agents (expert, random); a learned policy reads only
    ``turns`` and ``observation``.
    """

    env: Env
    turns: list[Turn]  # the episode so far, oldest first (a restored branch prefix included)
    observation: str  # the current observation, shown before acting


@runtime_checkable
class Agent(Protocol):
    def act(self, views: Sequence[AgentView]) -> Sequence[str | SampledAction]:
        """Return one action per view, in order: its text, or what a token-level policy sampled."""
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
