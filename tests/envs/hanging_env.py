"""Envs whose step hangs, for the step-timeout tests; ``RELEASE.set()`` lets hung steps finish."""

from __future__ import annotations

import threading

from envs.gym_toy import GuessNumberText
from tests.envs.fake_env import GuessEnv

RELEASE = threading.Event()
HANG_S = 60.0


class HangingGuessEnv(GuessEnv):
    """``GuessEnv`` whose step hangs on its third turn when reset with seed 11."""

    def reset(self, seed: int) -> str:
        self.seed = seed
        return super().reset(seed)

    def step(self, action: str):
        if self.seed == 11 and self.turns_taken == 2:
            RELEASE.wait(HANG_S)
        return super().step(action)


class HangingGym(GuessNumberText):
    """The gymnasium-style toy, hanging on the second step of every training episode (seed below
    2**31, ``envs.splits``) whose seed is even; evaluation episodes never hang, nor do the tokenizer's
    probe episodes (seeds below 1000), which run without a step timeout."""

    def reset(self, *, seed=None, options=None):
        self.seed = seed
        return super().reset(seed=seed)

    def step(self, action: str):
        if 1000 <= self.seed < 2**31 and self.seed % 2 == 0 and self._turns == 1:
            RELEASE.wait(HANG_S)
        return super().step(action)
