"""Hidden number: find an integer in ``1 .. n`` by calling ``guess(k)``; the tool says higher/lower.

The tool answers ``higher`` (hidden > k), ``lower`` (hidden < k) or ``correct``. With noise ``p``
the tool lies: when ``k != hidden`` the direction is flipped with probability ``p``, independently
per call; ``correct`` is always truthful (it is said exactly when ``k == hidden``).

Observations (one line per tool result, ``guess 8 : higher``):

- first observation: ``find the hidden number in 1 .. 16 . call guess(k)``;
- ``observation="last"``: only this turn's line (the tool result, or the error message);
- ``observation="transcript"``: every tool result so far, one per line, then the error message if
  this turn's action was malformed.

Because the env knows the exact noise model, it exposes the exact Bayes posterior over the hidden
number (uniform prior) and the predictive distribution of the next tool result. The expert guesses
the posterior median (the smallest k whose posterior CDF reaches 1/2): without noise this is plain
binary search on the interval consistent with the history, which always wins within
``ceil(log2(n + 1))`` guesses; with noise it is probabilistic bisection.
"""

from __future__ import annotations

import random
import re

from envs.base import EnvSnapshot, StepResult, ensure_not_done, ensure_started, snapshot_state
from envs.capabilities import Capabilities
from envs.tokenizer import words_of

ANSWERS = ("higher", "lower", "correct")
OBSERVATION_MODES = ("last", "transcript")
# Strict apart from case and whitespace: "guess(7)" and the tokenizer's "guess ( 7 )" both parse.
# ASCII only, so no Unicode look-alike letter, digit or space slips through.
_ACTION = re.compile(r"\s*guess\s*\(\s*([0-9]+)\s*\)\s*", re.IGNORECASE | re.ASCII)


def parse_guess(action: str) -> int | None:
    """The integer k of a ``guess(k)`` action, or None when the text is not of that form.

    Absurdly long numbers also give None (they are out of range for any n anyway), which keeps
    ``int()`` away from its digit limit.
    """
    match = _ACTION.fullmatch(action)
    if match is None:
        return None
    digits = match.group(1).lstrip("0") or "0"
    return int(digits) if len(digits) <= 18 else None


def answer_likelihood(answer: str, guess: int, hidden: int, noise: float) -> float:
    """P(tool answers ``answer`` | the agent guessed ``guess``, the number is ``hidden``)."""
    if guess == hidden:
        return 1.0 if answer == "correct" else 0.0
    truth = "higher" if hidden > guess else "lower"
    if answer == "correct":
        return 0.0
    return 1.0 - noise if answer == truth else noise


class HiddenNumberEnv:
    """Guess a hidden integer in ``1 .. n`` from (possibly noisy) higher/lower answers.

    Options: ``n`` (16), ``max_turns`` (6), ``noise`` (0.0, the lie probability, in [0, 0.5]:
    above 1/2 the answers are simply inverted), ``observation`` ("last" or "transcript").
    Reward 1.0 on ``correct`` (the episode ends, success); 0 otherwise; the episode also ends
    after ``max_turns`` turns, malformed and out-of-range actions included.
    """

    name = "hidden_number"
    capabilities = Capabilities(expert=True, task_key=False, max_turns_option=True, snapshots=True)

    def __init__(
        self, *, n: int = 16, max_turns: int = 6, noise: float = 0.0, observation: str = "last"
    ) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be an integer >= 1, got {n!r}")
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise ValueError(f"max_turns must be an integer >= 1, got {max_turns!r}")
        if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not 0.0 <= noise <= 0.5:
            raise ValueError(f"noise must be a probability in [0, 0.5], got {noise!r}")
        if observation not in OBSERVATION_MODES:
            raise ValueError(f"observation must be one of {OBSERVATION_MODES}, got {observation!r}")
        self.n = n
        self.max_turns = max_turns
        self.noise = float(noise)
        self.observation_mode = observation
        self._rng = random.Random(0)
        self._hidden = 0
        self._history: list[tuple[int, str]] = []  # (guess, answer) of every valid call
        self._turn = 0
        self._done = True
        self._started = False

    # --- text -------------------------------------------------------------------------------
    def _intro(self) -> str:
        return f"find the hidden number in 1 .. {self.n} . call guess(k)"

    def _error(self) -> str:
        return f"invalid action . call guess(k) with k in 1 .. {self.n}"

    @staticmethod
    def _result_line(guess: int, answer: str) -> str:
        return f"guess {guess} : {answer}"

    def _transcript(self) -> str:
        return "\n".join(self._result_line(k, a) for k, a in self._history)

    # --- protocol ---------------------------------------------------------------------------
    def reset(self, seed: int) -> str:
        """Draw the hidden number from ``random.Random(seed)``; that RNG also draws the lies."""
        self._rng = random.Random(seed)
        self._hidden = self._rng.randint(1, self.n)
        self._history = []
        self._turn = 0
        self._done = False
        self._started = True
        return self._intro()

    def step(self, action: str) -> StepResult:
        ensure_not_done(self._done, self.name)
        self._turn += 1
        guess = parse_guess(action)
        valid = guess is not None and 1 <= guess <= self.n
        info: dict = {"valid": valid, "turn": self._turn}
        if not valid:
            line = self._error()
            success = False
        else:
            answer, lied = self._answer(guess)
            self._history.append((guess, answer))
            line = self._result_line(guess, answer)
            success = answer == "correct"
            info.update(guess=guess, answer=answer, lied=lied)
        self._done = success or self._turn >= self.max_turns
        info["success"] = success
        if self.observation_mode == "transcript":
            # Results so far (this turn's included when valid), then the error line if any.
            lines = [self._result_line(k, a) for k, a in self._history] + ([] if valid else [line])
            observation = "\n".join(lines)
        else:
            observation = line
        return StepResult(observation, 1.0 if success else 0.0, self._done, info)

    def _answer(self, guess: int) -> tuple[str, bool]:
        if guess == self._hidden:
            return "correct", False
        truth, flipped = ("higher", "lower") if self._hidden > guess else ("lower", "higher")
        # Draw only when noisy, so noiseless episodes never touch the RNG after reset.
        if self.noise > 0.0 and self._rng.random() < self.noise:
            return flipped, True
        return truth, False

    def expert_action(self) -> str:
        """Guess the posterior median (binary search when noiseless)."""
        weights = self._likelihoods()
        total = sum(weights)
        cumulative = 0.0
        for k, w in enumerate(weights, start=1):
            cumulative += w
            # Unnormalised weights keep the noiseless case in exact integer arithmetic.
            if 2.0 * cumulative >= total:
                return f"guess({k})"
        return f"guess({self.n})"  # unreachable: the loop ends with cumulative == total

    def random_action(self, rng: random.Random) -> str:
        return f"guess({rng.randint(1, self.n)})"

    def anchor_observation(self) -> str:
        """The transcript of tool results so far (the intro line before any result).

        It fixes the agent's knowledge exactly (the posterior depends only on it). Malformed
        actions leave no line, so two steps with equal anchors may differ in turns left.
        """
        return self._transcript() if self._history else self._intro()

    def vocabulary(self) -> list[str]:
        numbers = range(1, self.n + 1)
        texts = [self._intro(), self._error()]
        texts += [self._result_line(k, a) for k in numbers for a in ANSWERS]
        texts += [f"guess({k})" for k in numbers]
        return sorted(words_of(texts) | {"\n"})

    # --- snapshots and tasks -----------------------------------------------------------------
    def _options(self) -> dict:
        return {"n": self.n, "max_turns": self.max_turns, "noise": self.noise, "observation": self.observation_mode}

    def snapshot(self) -> EnvSnapshot:
        """The hidden number, the tool results, turn, done flag and the lie RNG's state."""
        ensure_started(self._started, self.name, "snapshot")
        state = {
            "rng": self._rng.getstate(),
            "hidden": self._hidden,
            "history": list(self._history),
            "turn": self._turn,
            "done": self._done,
        }
        return EnvSnapshot.take(self.name, self._options(), state)

    def restore(self, snapshot: EnvSnapshot) -> None:
        state = snapshot_state(snapshot, self.name, self._options())
        self._rng = random.Random()
        self._rng.setstate(state["rng"])
        self._hidden, self._history = state["hidden"], state["history"]
        self._turn, self._done, self._started = state["turn"], state["done"], True

    def task_key(self) -> None:
        """None: every episode starts from the same observation and the hidden number is never
        shown, so an episode poses no observable task a policy could memorise. Held-out evaluation
        for this env keeps its seeds apart instead (see ``envs.splits``)."""
        ensure_started(self._started, self.name, "task_key")
        return None

    # --- exact Bayes ------------------------------------------------------------------------
    def _likelihoods(self) -> list[float]:
        """Unnormalised posterior: P(all answers so far | hidden = h) for h = 1 .. n."""
        weights = []
        for hidden in range(1, self.n + 1):
            w = 1.0
            for guess, answer in self._history:
                w *= answer_likelihood(answer, guess, hidden, self.noise)
            weights.append(w)
        return weights

    def posterior(self) -> list[float]:
        """P(hidden = h | history) for h = 1 .. n (index h - 1), under the uniform prior."""
        weights = self._likelihoods()
        total = sum(weights)
        return [w / total for w in weights]

    def predictive_distribution(self, k: int) -> dict[str, float]:
        """P(next tool result | history, next action ``guess(k)``) over higher / lower / correct."""
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= self.n:
            raise ValueError(f"k must be an integer in 1 .. {self.n}, got {k!r}")
        post = self.posterior()
        return {
            answer: sum(p * answer_likelihood(answer, k, h, self.noise) for h, p in enumerate(post, start=1))
            for answer in ANSWERS
        }
