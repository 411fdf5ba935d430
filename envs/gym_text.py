"""Any gymnasium-style env with text observations and actions, as a Reverie environment.

``make("gym_text", entry_point="my_pkg.envs:make_env", kwargs={...})`` builds the object that
``entry_point`` (``module:callable``, importable) returns when called with ``kwargs``. It needs
only gymnasium's API, not gymnasium itself:

- ``reset(seed=...) -> (observation, info)``;
- ``step(action) -> (observation, reward, terminated, truncated, info)``.

Mapping: ``terminated`` is Reverie's ``done``; ``truncated`` (a time limit, not part of the task)
becomes ``info["truncated"]`` with ``done=False``, which ``collect`` records as a truncated
episode; so does reaching this adapter's ``max_turns`` (also a cut-off from outside the wrapped
env). ``info["valid"]`` and ``info["success"]`` pass through when the env sets them; without
``success``, a terminated step with reward >= ``success_reward`` is a success (an imagined one, a
learned model's reward above ``success_threshold``: just under ``success_reward``). Observations and
actions must be ``str``. The wrapped env's optional ``expert_action``, ``random_action(rng)``,
``task_key`` and ``is_well_formed(text)`` are used when present, found on the env or, behind
gymnasium's wrappers (which hide them), on its ``unwrapped`` env; so ``entry_point=gymnasium:make``
with ``kwargs={"id": "my_pkg.envs:MyEnv-v0", "max_episode_steps": 20}`` takes a registered gymnasium
env as it is, ``TimeLimit`` truncation included. Snapshots replay seed and actions
(``envs.replay``), so the env must be determined by its reset seed.
"""

from __future__ import annotations

import importlib
import random
from typing import Any

from envs.base import EnvSnapshot, EpisodeDoneError, StepResult, ensure_not_done, ensure_started
from envs.capabilities import Capabilities
from envs.probe import probe_texts
from envs.replay import ReplayLog, replay_snapshot, restore_by_replay
from envs.tokenizer import words_of

EXAMPLE_ENTRY_POINT = "envs.gym_toy:GuessNumberText"


def load_entry_point(entry_point: str) -> Any:
    """The callable named by ``module:callable``; a clear error naming the key otherwise."""
    if not isinstance(entry_point, str) or entry_point.count(":") != 1:
        raise ValueError(f"env.kwargs.entry_point must look like 'package.module:callable', got {entry_point!r}")
    module_name, attribute = entry_point.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"env.kwargs.entry_point: cannot import {module_name!r} ({error})") from error
    target = getattr(module, attribute, None)
    if not callable(target):
        raise ValueError(f"env.kwargs.entry_point: {module_name!r} has no callable {attribute!r}")
    return target


class GymTextEnv:
    """A gymnasium-style text env behind Reverie's contract (see the module docstring).

    Options: ``entry_point`` (``module:callable``), ``kwargs`` (its keyword arguments), ``max_turns``
    (turns after which the episode is cut off as truncated; default 50), ``success_reward`` (1.0).
    """

    name = "gym_text"
    extra = None  # needs no optional package: the wrapped env brings its own

    def __init__(self, *, entry_point: str = EXAMPLE_ENTRY_POINT, kwargs: dict[str, Any] | None = None,
                 max_turns: int = 50, success_reward: float = 1.0) -> None:
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise ValueError(f"env.kwargs.max_turns must be an integer >= 1, got {max_turns!r}")
        self.entry_point, self.kwargs = entry_point, dict(kwargs or {})
        self.max_turns, self.success_reward = max_turns, float(success_reward)
        build = load_entry_point(entry_point)
        try:
            inner = build(**self.kwargs)
        except Exception as error:  # the wrapped env's own message, on one line, under the key that fed it
            message = " ".join(str(error).split())
            raise ValueError(f"env.kwargs.kwargs: {entry_point} refused {self.kwargs} "
                             f"({type(error).__name__}: {message})") from error
        for method in ("reset", "step"):
            if not callable(getattr(inner, method, None)):
                raise ValueError(f"env.kwargs.entry_point {entry_point!r} built a {type(inner).__name__} without {method}()")
        self._inner = inner
        self._log = ReplayLog()
        self._vocabulary: list[str] | None = None
        self._turn, self._ended, self._last = 0, True, ""

    @property
    def capabilities(self) -> Capabilities:
        has = lambda method: self._optional(method) is not None  # noqa: E731
        return Capabilities(expert=has("expert_action"), task_key=has("task_key"), max_turns_option=True,
                            snapshots=True, random_action=has("random_action"))

    @property
    def success_threshold(self) -> float:
        """The reward above which a learned model's final step counts as a success: just under
        ``success_reward`` (a real step succeeds at or above it)."""
        return self.success_reward - 1e-6

    def reset(self, seed: int) -> str:
        observation, _ = self._inner.reset(seed=seed)
        self._last = _text(observation, "reset")
        self._turn, self._ended = 0, False
        self._log.start(seed, self._last)
        return self._last

    def step(self, action: str) -> StepResult:
        ensure_not_done(self._ended, self.name)
        observation, reward, terminated, truncated, info = self._inner.step(action)
        self._turn += 1
        info = dict(info or {})
        cut = bool(truncated) or (not terminated and self._turn >= self.max_turns)
        success = bool(info.get("success", bool(terminated) and float(reward) >= self.success_reward))
        self._ended = bool(terminated) or cut
        self._last = _text(observation, "step")
        self._log.record(action, self._last)
        return StepResult(self._last, float(reward), bool(terminated), {
            **info, "valid": bool(info.get("valid", True)), "success": success, "truncated": cut, "turn": self._turn})

    def _optional(self, method: str):
        """The wrapped env's optional ``method``, else its ``unwrapped`` env's (gymnasium's wrappers do
        not forward custom methods); None when neither has it."""
        for env in (self._inner, getattr(self._inner, "unwrapped", None)):
            found = getattr(env, method, None)
            if callable(found):
                return found
        return None

    def _extra(self, method: str):
        found = self._optional(method)
        if found is None:
            raise NotImplementedError(f"gym_text: {type(self._inner).__name__} has no {method}()")
        return found

    def expert_action(self) -> str:
        return self._extra("expert_action")()

    def random_action(self, rng: random.Random) -> str:
        return self._extra("random_action")(rng)

    def task_key(self) -> str | None:
        ensure_started(self._log.seed is not None, self.name, "task_key")
        found = self._optional("task_key")
        return found() if found is not None else None

    def is_well_formed(self, text: str) -> bool:
        found = self._optional("is_well_formed")
        return bool(found(text)) if found is not None else True

    def anchor_observation(self) -> str:
        return self._last

    def vocabulary(self) -> list[str]:
        """Words of probe episodes (``envs.probe``): a hint for word-level tokenizers."""
        if self._vocabulary is None:
            self._vocabulary = sorted(words_of(probe_texts(GymTextEnv(**self._options()), episodes=16)) | {"\n"})
        return list(self._vocabulary)

    def _options(self) -> dict[str, Any]:
        return {"entry_point": self.entry_point, "kwargs": dict(self.kwargs), "max_turns": self.max_turns,
                "success_reward": self.success_reward}

    def snapshot(self) -> EnvSnapshot:
        return replay_snapshot(self, self._log, self._options())

    def restore(self, snapshot: EnvSnapshot) -> None:
        restore_by_replay(self, snapshot, self._options())


def _text(observation: Any, where: str) -> str:
    if not isinstance(observation, str):
        raise TypeError(f"gym_text: {where}() returned a {type(observation).__name__} observation; text envs return str")
    return observation


__all__ = ["EpisodeDoneError", "GymTextEnv", "load_entry_point"]
