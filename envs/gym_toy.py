"""A tiny gymnasium-style text env: the worked example of ``env=gym_text`` (and its tests' subject).

Guess a number from 1 to ``n`` in ``[k]`` format; the answer is ``higher`` / ``lower``. It follows
gymnasium's API (``reset(seed=...) -> (obs, info)``, ``step(a) -> (obs, reward, terminated,
truncated, info)``) without importing gymnasium, truncates after ``time_limit`` guesses, and draws
from its own ``random.Random(seed)``, so it is determined by its seed.
"""

from __future__ import annotations

import random
import re

_GUESS = re.compile(r"\[(\d+)\]")


class GuessNumberText:
    """Options: ``n`` (16), ``time_limit`` (8 guesses, then truncated)."""

    def __init__(self, n: int = 16, time_limit: int = 8) -> None:
        self.n, self.time_limit = n, time_limit
        self._target, self._low, self._high, self._turns = 1, 1, n, 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        self._target = random.Random(seed).randint(1, self.n)
        self._low, self._high, self._turns = 1, self.n, 0
        return f"guess a number from 1 to {self.n} . answer like [3]", {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        self._turns += 1
        match = _GUESS.fullmatch(action.strip())
        guess = int(match.group(1)) if match else None
        truncated = self._turns >= self.time_limit
        if guess is None or not 1 <= guess <= self.n:
            return f"invalid . answer like [3] with a number from 1 to {self.n}", 0.0, False, truncated, {"valid": False}
        if guess == self._target:
            return "correct", 1.0, True, False, {"valid": True}
        if guess < self._target:
            self._low = max(self._low, guess + 1)
        else:
            self._high = min(self._high, guess - 1)
        hint = "higher" if guess < self._target else "lower"
        return hint, 0.0, False, truncated, {"valid": True}

    def expert_action(self) -> str:
        """Binary search over what the hints leave open."""
        return f"[{(self._low + self._high) // 2}]"

    def random_action(self, rng: random.Random) -> str:
        return f"[{rng.randint(1, self.n)}]"

    def is_well_formed(self, text: str) -> bool:
        match = _GUESS.fullmatch(text.strip())
        return match is not None and 1 <= int(match.group(1)) <= self.n
