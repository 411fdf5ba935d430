"""TextArena's single-player games as Reverie environments: ``make("textarena", game="GuessTheNumber-v0")``.

What the adapter reconciles (the optional package: ``pip install -e '.[textarena]'``):

- Global random: TextArena seeds and draws from Python's module-level ``random``. Every call into
  the game runs under the env's own stream (``envs.isolated_random``), in the calling thread only,
  so the caller's draws and other envs' are untouched (also while a step run under a timeout hangs
  in its thread) and an episode is determined by its reset seed and actions.
- Turns and validity: TextArena does not count an invalid move as a turn and ends the game on the
  second invalid move in a row; a repeated guess is invalid although its text is well formed.
  Here every action is a turn (``info["turn"]``; the game's own count is ``info["game_turn"]``),
  ``info["valid"]`` is what the game decided (read from its error bookkeeping, not from the text),
  and the episode is done when the game ends or after ``max_turns`` turns (default: the limit the
  game states; the game itself, not counting invalid moves, may allow more). Nothing raises on a
  malformed action: the game's error message is the observation.
- Reward: 1.0 on a win (the game's reward of 1) and 0.0 otherwise by default, so a loss with
  partial credit is not mistaken for a success; ``reward="textarena"`` passes the game's own
  final reward through instead (on a cut by ``max_turns``, the completion share the game computes
  for a loss). ``info["success"]`` is a win either way; ``info["game_reward"]`` the game's reward.
- Observation: the game's messages since the last action (``observation="last"``; the player's
  own echoed action left out, the game's end reason added on the last turn), or everything shown
  since reset (``"transcript"``).
- Snapshots by replay of seed and actions (``envs.replay``); task keys where the game draws an
  observable task (``envs.textarena_games``), else None.
- Any game, listed or not: ``action_pattern`` (a regex) and ``random_action`` (a template,
  ``envs.action_template``) in the options override or supply what ``envs.textarena_games`` knows;
  an unlisted game without them is taken to put its actions in square brackets and has no random
  actions (its probe episodes then play the malformed probe only).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import random
import re
import sys
from typing import Any

from envs.action_template import parse_action_template, sample_action
from envs.base import EnvSnapshot, StepResult, ensure_not_done, ensure_started
from envs.capabilities import Capabilities, missing_extra
from envs.isolated_random import IsolatedRandom
from envs.probe import probe_texts
from envs.replay import ReplayLog, replay_snapshot, restore_by_replay
from envs.textarena_games import game_spec
from envs.tokenizer import words_of

REWARDS = ("success", "textarena")
OBSERVATIONS = ("last", "transcript")
WIN_REWARD = 1.0  # what TextArena's single-player games give on a win; partial credit stays below it
PARTIAL_CREDIT_CEILING = 0.975  # above the listed games' best partial credit on a loss, below a win
BRACKETED_ACTION = re.compile(r"\[[^\[\]]+\]")  # most TextArena games parse their move from `[...]`


def load_textarena() -> Any:
    reason = missing_extra("textarena")
    if reason is not None:
        raise ImportError(f"env=textarena: {reason}")
    outer = random.getstate()
    try:
        return importlib.import_module("textarena")
    finally:
        random.setstate(outer)  # importing it draws from the global stream once


class TextArenaEnv:
    """One TextArena single-player game; see the module docstring for what is mapped how.

    Options: ``game`` (a TextArena id, e.g. ``GuessTheNumber-v0``, ``Mastermind-v0``,
    ``TowerOfHanoi-v0``, ``FrozenLake-v0``), ``game_kwargs`` (the game's own constructor options),
    ``max_turns`` (Reverie's turn budget, invalid moves included; None: the game's own limit),
    ``reward`` (``success`` or ``textarena``), ``observation`` (``last`` or ``transcript``),
    ``action_pattern`` (a regex the game's parser searches for; default: the listed game's, else one
    bracketed span) and ``random_action`` (a template such as ``[{0-4} {0-4}]``; default: the listed
    game's rule, else none).
    """

    name = "textarena"
    extra = "textarena"  # the optional dependency group it needs

    def __init__(self, *, game: str = "GuessTheNumber-v0", game_kwargs: dict[str, Any] | None = None,
                 max_turns: int | None = None, reward: str = "success", observation: str = "last",
                 action_pattern: str | None = None, random_action: str | None = None) -> None:
        if reward not in REWARDS:
            raise ValueError(f"env.kwargs.reward must be one of {REWARDS}, got {reward!r}")
        if observation not in OBSERVATIONS:
            raise ValueError(f"env.kwargs.observation must be one of {OBSERVATIONS}, got {observation!r}")
        if max_turns is not None and (isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1):
            raise ValueError(f"env.kwargs.max_turns must be an integer >= 1 or null, got {max_turns!r}")
        textarena = load_textarena()
        if f"{game}-raw" not in textarena.envs.registration.ENV_REGISTRY:
            raise ValueError(f"env.kwargs.game: TextArena has no game {game!r} (ids look like 'GuessTheNumber-v0')")
        self.game, self.reward, self.observation = game, reward, observation
        self.game_kwargs = dict(game_kwargs or {})
        self.spec = game_spec(game)
        self.action_pattern, self.random_action_template = action_pattern, random_action
        self._pattern = _compile_pattern(action_pattern) if action_pattern is not None else (
            self.spec.action_pattern if self.spec is not None else BRACKETED_ACTION)
        self._random_parts = (None if random_action is None
                              else parse_action_template(random_action, "env.kwargs.random_action"))
        self._random = IsolatedRandom()
        self._inner = _make_game(textarena, game, self.game_kwargs)  # no wrappers: Reverie renders history
        self._log = ReplayLog()
        self._vocabulary: list[str] | None = None
        self.max_turns = max_turns if max_turns is not None else self._game_turn_limit()
        self._reset_counters()

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(expert=self.spec is not None and self.spec.expert is not None,
                            task_key=self.spec is not None and self.spec.task_key is not None,
                            max_turns_option=True, snapshots=True, random_action=self._has_random_actions(),
                            extra="textarena")

    @property
    def success_threshold(self) -> float:
        """The reward above which a final step is a win (for a learned model's rewards): midway
        between 0 and 1 with 0/1 rewards; with the game's own, between a win's 1 and the partial
        credit of a loss (at most 18/19 in GuessTheNumber-v0, 3/4 in Mastermind-v0)."""
        return 0.5 if self.reward == "success" else PARTIAL_CREDIT_CEILING

    def _has_random_actions(self) -> bool:
        return self._random_parts is not None or self.spec is not None

    def _game_turn_limit(self) -> int:
        with _download_refusal(self.game):
            self._call(self._inner.reset, num_players=1, seed=0)
        limit = getattr(self._inner.state, "max_turns", None)
        if not isinstance(limit, int) or limit < 1:
            raise ValueError(f"TextArena game {self.game!r} has no turn limit: set env.kwargs.max_turns")
        return limit

    def _reset_counters(self) -> None:
        self._turn, self._done, self._shown, self._last = 0, True, "", ""

    def _call(self, method, *args, **kwargs):
        with self._random.active():
            return method(*args, **kwargs)

    def _messages(self) -> str:
        _, messages = self._call(self._inner.get_observation)
        player_action = importlib.import_module("textarena").ObservationType.PLAYER_ACTION
        return "\n".join(text.strip() for _, text, kind in messages if kind != player_action and text.strip())

    # --- the core contract ------------------------------------------------------------------
    def reset(self, seed: int) -> str:
        self._call(self._inner.reset, num_players=1, seed=seed)
        self._reset_counters()
        self._done = False
        self._last = self._shown = self._messages()
        self._log.start(seed, self._last)
        return self._last

    def step(self, action: str) -> StepResult:
        ensure_not_done(self._done, self.name)
        state = self._inner.state
        errors_before = getattr(state, "error_count", 0)
        game_done, _ = self._call(self._inner.step, action)
        self._turn += 1
        info = state.game_info.get(0, {}) if isinstance(getattr(state, "game_info", None), dict) else {}
        valid = not (info.get("invalid_move", False) or getattr(state, "error_count", 0) > errors_before)
        text = self._messages()
        self._done = bool(game_done) or self._turn >= self.max_turns
        game_reward = self._final_reward(bool(game_done)) if self._done else None
        if game_done and info.get("reason"):
            text = f"{text}\n{info['reason']}".strip()
        success = bool(game_done) and game_reward >= WIN_REWARD
        reward = (1.0 if success else 0.0) if self.reward == "success" else (game_reward or 0.0)
        self._shown = f"{self._shown}\n{text}"
        self._last = self._shown if self.observation == "transcript" else text
        self._log.record(action, self._last)
        return StepResult(self._last, reward, self._done, {
            "valid": valid, "success": success, "turn": self._turn, "game_turn": getattr(state, "turn", None),
            "game_reward": game_reward})

    def _final_reward(self, game_done: bool) -> float:
        """The game's reward when it ended the episode; when Reverie's turn budget did (the game
        does not count invalid moves, so its own limit comes later), the completion share the game
        would give on a loss, where it computes one, else 0."""
        if game_done:
            return float(self._inner.state.rewards[0]) if self._inner.state.rewards else 0.0
        share = getattr(self._inner, "_get_percentage_completion", None)
        return float(self._call(share)) if callable(share) else 0.0

    # --- extras ------------------------------------------------------------------------------
    def is_well_formed(self, text: str) -> bool:
        """Whether the game's parser would find an action in ``text`` (by ``action_pattern``: the
        listed game's, or a bracketed span). A well-formed action can still be invalid in the game."""
        return self._pattern.search(text) is not None

    def random_action(self, rng: random.Random) -> str:
        if not self._has_random_actions():
            raise NotImplementedError(f"textarena: no random actions known for {self.game!r}; give a rule "
                                      "such as env.kwargs.random_action='[{0-4} {0-4}]'")
        ensure_started(self._log.seed is not None, self.name, "random_action")
        if self._random_parts is not None:
            return sample_action(self._random_parts, rng)
        return self.spec.random_action(self._inner, rng)

    def expert_action(self) -> str:
        if self.spec is None or self.spec.expert is None:
            raise NotImplementedError(f"textarena: {self.game!r} has no scripted expert; warm-start from "
                                      "transcripts (trainer.warm_start.transcripts) or start without one")
        ensure_started(self._log.seed is not None, self.name, "expert_action")
        return self.spec.expert(self._inner)

    def anchor_observation(self) -> str:
        return self._last

    def vocabulary(self) -> list[str]:
        """Words of probe episodes (``envs.probe``): a hint for word-level tokenizers, not a promise."""
        if self._vocabulary is None:
            probe = TextArenaEnv(**self._options())
            self._vocabulary = sorted(words_of(probe_texts(probe, episodes=16)) | {"\n"})
        return list(self._vocabulary)

    def task_key(self) -> str | None:
        ensure_started(self._log.seed is not None, self.name, "task_key")
        if self.spec is None or self.spec.task_key is None:
            return None
        return self.spec.task_key(self._inner)

    def _options(self) -> dict[str, Any]:
        return {"game": self.game, "game_kwargs": dict(self.game_kwargs), "max_turns": self.max_turns,
                "reward": self.reward, "observation": self.observation,
                "action_pattern": self.action_pattern, "random_action": self.random_action_template}

    def snapshot(self) -> EnvSnapshot:
        return replay_snapshot(self, self._log, self._options())

    def restore(self, snapshot: EnvSnapshot) -> None:
        restore_by_replay(self, snapshot, self._options())


def _compile_pattern(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as error:
        raise ValueError(f"env.kwargs.action_pattern: {pattern!r} is not a regular expression ({error})") from None


@contextlib.contextmanager
def _download_refusal(game: str):
    """A game that loads data it must download (nltk's word lists) and cannot: one line saying so
    (nltk's own lines about the refused download are held back then, passed on otherwise)."""
    held = io.StringIO()
    try:
        with contextlib.redirect_stdout(held), contextlib.redirect_stderr(held):
            yield
    except LookupError as error:  # nltk's "Resource 'words' not found" after a refused download
        first = next((line.strip() for line in str(error).splitlines() if line.strip().strip("*")), "")
        raise RuntimeError(f"env.kwargs.game: TextArena's {game!r} needs data it could not download "
                           f"({first}); install that data with network access, or pick another game") from None
    except BaseException:
        sys.stderr.write(held.getvalue())
        raise
    sys.stderr.write(held.getvalue())


def _make_game(textarena: Any, game: str, game_kwargs: dict[str, Any]) -> Any:
    with _download_refusal(game):
        return textarena.make(f"{game}-raw", **game_kwargs)
