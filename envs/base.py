"""The environment contract every Reverie environment follows.

An environment is text in, text out. ``reset(seed)`` returns the first observation;
``step(action)`` returns a :class:`StepResult`. A malformed action never raises: the env answers
with an error observation that states the valid format, counts the turn, and sets
``info["valid"] = False``. Stepping after the episode is done raises :class:`EpisodeDoneError`.
Environments are seeded by their own ``random.Random``, never by global state.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class StepResult:
    """What one call to ``Env.step`` returns."""

    observation: str
    reward: float
    done: bool
    info: dict[str, Any] = field(default_factory=dict)


class EpisodeDoneError(RuntimeError):
    """Raised when ``step`` is called on an episode that has already ended."""


@runtime_checkable
class Env(Protocol):
    """A seeded, text-in text-out environment for a multi-turn agent."""

    name: str
    max_turns: int

    def reset(self, seed: int) -> str:
        """Start a new episode drawn from ``seed``; return the first observation."""
        ...

    def step(self, action: str) -> StepResult:
        """Apply the agent's action text. ``info["valid"]`` says whether it parsed."""
        ...

    def expert_action(self) -> str:
        """The scripted expert's next action in the current state."""
        ...

    def random_action(self, rng: random.Random) -> str:
        """A well-formed action drawn uniformly from a sensible set, using ``rng`` only."""
        ...

    def anchor_observation(self) -> str:
        """The raw current observation without history: the key GiGPO groups steps on."""
        ...

    def vocabulary(self) -> list[str]:
        """Every word this env's observations and valid actions can contain."""
        ...


def ensure_not_done(done: bool, env_name: str) -> None:
    """Raise a clear error when an episode is stepped after it ended."""
    if done:
        raise EpisodeDoneError(f"{env_name}: step() called after the episode ended; call reset(seed) first")
