"""A real ``gymnasium.Env`` with text spaces, registered on import as ``GuessNumberText-v0``: what a
researcher's own gymnasium package looks like to ``env=gym_text``.

``gymnasium.make("tests.envs.gymnasium_toy:GuessNumberText-v0", max_episode_steps=...)`` imports this
module (registering the id), then wraps the env in gymnasium's own wrappers (order enforcing, the
passive checker, and ``TimeLimit``, which truncates), so the adapter meets gymnasium's real API.
"""

from __future__ import annotations

import gymnasium
from gymnasium import spaces

from envs.gym_toy import GuessNumberText

CHARSET = "abcdefghijklmnopqrstuvwxyz0123456789 .[]"


class GuessNumberGym(gymnasium.Env):
    """``envs.gym_toy.GuessNumberText`` as a ``gymnasium.Env``; its expert and random actions live on
    the unwrapped env, where gymnasium's wrappers hide them."""

    metadata = {"render_modes": []}

    def __init__(self, n: int = 16) -> None:
        self._game = GuessNumberText(n=n, time_limit=10**9)  # the time limit is gymnasium's TimeLimit here
        self.observation_space = spaces.Text(max_length=128, charset=CHARSET)
        self.action_space = spaces.Text(max_length=16, charset=CHARSET)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        return self._game.reset(seed=seed)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        return self._game.step(action)

    def expert_action(self) -> str:
        return self._game.expert_action()

    def random_action(self, rng) -> str:
        return self._game.random_action(rng)


gymnasium.register(id="GuessNumberText-v0", entry_point=GuessNumberGym)
