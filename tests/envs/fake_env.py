"""A tiny deterministic env and a scripted agent, for testing rollout and storage code.

``GuessEnv`` hides ``target = seed % 9 + 1`` (plain arithmetic, so tests can work outcomes out by
hand) and answers ``guess N`` with ``higher`` / ``lower`` / ``correct``. Its anchor observation
``t=<turns taken> hint=<last hint>`` changes on every step, which shows when it was read.
``CoreGuessEnv`` is the same game with only the core protocol, like a world-model env.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence

from envs.agent import AgentView
from envs.base import StepResult, ensure_not_done

INVALID = "invalid action: answer `guess N` with N from 1 to 9"
INVALID_REWARD = -0.25


class GuessEnv:
    """Guess a number from 1 to 9 in at most ``max_turns`` turns."""

    name = "fake_guess"

    def __init__(self, max_turns: int = 6) -> None:
        self.max_turns = max_turns
        self.target = 0
        self.turns_taken = 0
        self.hint = "none"
        self.done = True

    def reset(self, seed: int) -> str:
        self.target = seed % 9 + 1
        self.turns_taken = 0
        self.hint = "none"
        self.done = False
        return f"episode {seed}: guess a number from 1 to 9"

    def step(self, action: str) -> StepResult:
        ensure_not_done(self.done, self.name)
        self.turns_taken += 1
        match = re.fullmatch(r"guess ([1-9])", action.strip())
        valid, success = match is not None, False
        if match is None:
            observation, reward = INVALID, INVALID_REWARD
        elif int(match.group(1)) == self.target:
            observation, reward, success = "correct", 1.0, True
        else:
            observation, reward = ("higher" if int(match.group(1)) < self.target else "lower"), 0.0
        self.hint = observation if valid else "invalid"
        self.done = success or self.turns_taken >= self.max_turns
        return StepResult(observation, reward, self.done, {"valid": valid, "success": success})

    def expert_action(self) -> str:
        return f"guess {self.target}"

    def random_action(self, rng: random.Random) -> str:
        return f"guess {rng.randint(1, 9)}"

    def anchor_observation(self) -> str:
        return f"t={self.turns_taken} hint={self.hint}"

    def vocabulary(self) -> list[str]:
        return ["guess", "higher", "lower", "correct", "invalid", *map(str, range(10))]


class ScriptedAgent:
    """Acts with ``policy(view)`` for each view and records the size of every batched call."""

    def __init__(self, policy: Callable[[AgentView], str]) -> None:
        self.policy = policy
        self.batch_sizes: list[int] = []

    def act(self, views: Sequence[AgentView]) -> list[str]:
        self.batch_sizes.append(len(views))
        return [self.policy(view) for view in views]


def count_up(view: AgentView) -> str:
    """Guess 1, 2, 3, ... : the episode with target k ends after exactly k turns."""
    return f"guess {len(view.turns) + 1}"


class CoreGuessEnv:
    """``GuessEnv`` with only ``name``, ``max_turns``, ``reset`` and ``step``: no scripted extras."""

    name = "fake_guess"

    def __init__(self, max_turns: int = 6) -> None:
        self.max_turns = max_turns
        self._inner = GuessEnv(max_turns)

    def reset(self, seed: int) -> str:
        return self._inner.reset(seed)

    def step(self, action: str) -> StepResult:
        return self._inner.step(action)
