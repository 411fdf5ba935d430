"""A saved world model as a gymnasium env: ``gymnasium.make("reverie/Dream-v0", world_model=DIR, env=NAME)``.

Any trainer that speaks gymnasium can roll out in the learned model: observations and actions are
text (``gymnasium.spaces.Text``), ``reset`` starts from a real state and ``step`` imagines one turn.
This is a thin adapter over :class:`imagination.dream_env.DreamEnv`, which does the imagining and
reads reward and done off the sampled text with the env's own rules (the model's heads for an env
without rules); nothing of it is rewritten here.

Why here, in ``imagination``: the adapter needs ``DreamEnv`` (imagination) and nothing to its right
(experiments, benchmarks), so ``imagination`` is the leftmost package that may hold it. gymnasium
is an optional extra (``pip install reverie[gym]``): this module imports it at the top, and nothing
else in the library imports this module, so ``import imagination`` works without gymnasium.

Registration: importing this module registers ``reverie/Dream-v0`` (``register_envs``), so
``gymnasium.make("imagination.gym_dream:reverie/Dream-v0", ...)`` works in any process with no
import by the user (gymnasium imports the module named before the colon). The same
``register_envs`` is declared in pyproject under the ``gymnasium.envs`` entry-point group, the
plugin hook that gymnasium before 1.0 loads at its own import; gymnasium 1.0 removed that hook, so
with the pinned gymnasium the ``module:`` form (or importing this module) is the way in.
"""

from __future__ import annotations

import os
import string
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from envs.store import TrajectoryStore
from imagination.dream_env import DreamEnv, DreamStepper
from imagination.dream_starts import draw_store_start, draw_train_seed, matching_trajectories
from world_model.loading import load_world_model
from world_model.protocol import WorldModelLike
from world_model.turn_tokens import TurnTokenizer, default_token_limits

ENV_ID = "reverie/Dream-v0"
RESET_OPTIONS = ("env_seed", "trajectory_id", "turn")
"""``reset(options=...)`` keys: ``env_seed`` starts from that real seed's first observation;
``trajectory_id`` (with ``turn``, default 0) starts after that turn of a trajectory of the store."""


def text_charset(tokenizer: TurnTokenizer) -> frozenset[str]:
    """Every character the model can write (those of its words: the LM world model too maps its
    text back onto them) plus printable ASCII, whitespace included, which covers the envs' own
    texts and lets ``action_space.sample()`` type anything."""
    return frozenset("".join(tokenizer.tokenizer.get_vocab())) | frozenset(string.printable)


def text_lengths(tokenizer: TurnTokenizer, env_name: str, env_kwargs: dict[str, Any]) -> tuple[int, int]:
    """(observation, action) caps in characters.

    A text of ``w`` words is at most ``w * (longest word + 1)`` characters when one space or newline
    separates its words; the observation cap doubles that for runs of whitespace in real texts and
    takes the larger of the model's word cap and the real env's (a model may cap words below what
    the env writes, and a reset shows the env's own text). Actions longer than their cap are still
    taken: the model reads their first words, as it does for any action.
    """
    longest = max(len(word) for word in tokenizer.tokenizer.get_vocab()) + 1
    words = tokenizer.limits.observation
    try:
        words = max(words, default_token_limits(env_name, env_kwargs).observation)
    except ValueError:
        pass  # an adapter env without default caps: the model's caps are all there is
    return 2 * words * longest, tokenizer.limits.action * longest


def _load_model(world_model: str | os.PathLike | WorldModelLike) -> WorldModelLike:
    if isinstance(world_model, (str, os.PathLike)):
        return load_world_model(world_model).eval()
    if not isinstance(world_model, WorldModelLike):
        raise TypeError(
            f"world_model must be a saved model's folder or a world model, got {type(world_model).__name__}"
        )
    return world_model


def _load_store(store: str | os.PathLike | TrajectoryStore | None, env: str, env_kwargs: dict[str, Any]):
    """The store's real trajectories of this env; None without a store."""
    if store is None:
        return None
    store = store if isinstance(store, TrajectoryStore) else TrajectoryStore(store)
    trajectories = matching_trajectories(store.filter(source="real", env_name=env), env, env_kwargs)
    if not trajectories:
        raise ValueError(f"store {store.path} holds no real trajectory of {env!r} with {env_kwargs}")
    return trajectories


class DreamGymEnv(gymnasium.Env):
    """The world model saved in ``world_model`` (a folder, or a model already loaded) as a
    gymnasium env imagining env ``env`` built with ``env_kwargs``.

    ``reset(seed=..., options=...)`` draws the start with ``self.np_random``: a training-split seed
    of the env (``envs.splits``), or, given ``store`` (a ``TrajectoryStore`` or its folder), a real
    trajectory of the env from it and a turn to start after; ``options`` pick one instead
    (``RESET_OPTIONS``). It then reseeds the model's sampler from ``self.np_random``, so the same
    seed gives the same episode for the same actions. The reset ``info`` says where it started.

    ``step(action)`` returns ``(observation, reward, terminated, truncated, info)`` from
    ``DreamEnv.step``: ``terminated`` is its ``done`` (the env's rule on the sampled text, or the
    real env's turn budget), ``truncated`` its truncation (``halt_uncertainty``, ``horizon``).
    ``info`` is ``DreamEnv``'s (``uncertainty`` is the ensemble's disagreement on the written text,
    ``valid`` the real env's parser on the action, ``halted``...) plus ``would_halt``: whether the
    disagreement is above ``halt_uncertainty``, also on a step that ends for another reason. A
    malformed action is answered like any other, by the model, as the real env answers it with its
    error text; only a non-string action raises. ``reward_penalty``, ``halt_uncertainty``,
    ``horizon``, ``outcome`` and ``greedy`` are ``DreamEnv``'s controls.
    """

    metadata = {"render_modes": []}  # text in, text out: the observation is all there is to show

    def __init__(
        self,
        world_model: str | os.PathLike | WorldModelLike,
        env: str,
        env_kwargs: dict[str, Any] | None = None,
        *,
        store: str | os.PathLike | TrajectoryStore | None = None,
        greedy: bool = False,
        reward_penalty: float = 0.0,
        halt_uncertainty: float | None = None,
        horizon: int | None = None,
        outcome: str = "text",
    ) -> None:
        self.model = _load_model(world_model)
        self.env_kwargs = dict(env_kwargs or {})
        self._stepper = DreamStepper(self.model, seed=0, greedy=greedy)  # reseeded at every reset
        self.dream = DreamEnv(
            self.model, env, self.env_kwargs, stepper=self._stepper, reward_penalty=reward_penalty,
            halt_uncertainty=halt_uncertainty, horizon=horizon, outcome=outcome,
        )  # fmt: skip
        self._trajectories = _load_store(store, self.dream.name, self.env_kwargs)
        charset = text_charset(self.model.tokenizer)
        observation_length, action_length = text_lengths(
            self.model.tokenizer, self.dream.name, self.env_kwargs
        )
        self.observation_space = spaces.Text(observation_length, min_length=0, charset=charset)
        self.action_space = spaces.Text(action_length, min_length=0, charset=charset)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        observation, info = self._start(dict(options or {}))
        self._stepper.reseed(int(self.np_random.integers(0, 2**63 - 1)))
        return observation, info

    def _start(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Start the dream as ``options`` say, else from a draw; the observation and the reset info."""
        unknown = sorted(set(options) - set(RESET_OPTIONS))
        if unknown:
            raise ValueError(f"unknown reset option(s) {unknown}; valid options: {', '.join(RESET_OPTIONS)}")
        if "env_seed" in options and "trajectory_id" in options:
            raise ValueError("reset options env_seed and trajectory_id exclude each other")
        if "turn" in options and "trajectory_id" not in options:
            raise ValueError("reset option turn needs trajectory_id")
        if "trajectory_id" in options:
            return self._start_from(self._trajectory(options["trajectory_id"]), options.get("turn", 0))
        if "env_seed" in options or self._trajectories is None:
            env_seed = options.get("env_seed")
            if env_seed is None:
                env_seed = draw_train_seed(self.dream.name, self.env_kwargs, self.np_random)
            if isinstance(env_seed, bool) or not isinstance(env_seed, (int, np.integer)):
                raise ValueError(f"reset option env_seed must be an integer, got {env_seed!r}")
            observation = self.dream.reset(int(env_seed))
            return observation, {"env_seed": int(env_seed), "trajectory_id": None, "start_turn": 0}
        return self._start_from(*draw_store_start(self._trajectories, self.dream.max_turns, self.np_random))

    def _trajectory(self, trajectory_id: int):
        if self._trajectories is None:
            raise ValueError("reset option trajectory_id needs a store (DreamGymEnv(store=...))")
        for trajectory in self._trajectories:
            if trajectory.trajectory_id == trajectory_id:
                return trajectory
        raise ValueError(
            f"reset option trajectory_id: no real trajectory {trajectory_id!r} of this env in the store"
        )

    def _start_from(self, trajectory, turn: int) -> tuple[str, dict[str, Any]]:
        observation = self.dream.start_from(trajectory, turn)
        return observation, {
            "env_seed": trajectory.seed,
            "trajectory_id": trajectory.trajectory_id,
            "start_turn": turn,
        }

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if not isinstance(action, str):
            raise TypeError(f"the action must be text (a str), got {type(action).__name__}")
        result = self.dream.step(action)
        info = dict(result.info)
        threshold = self.dream.halt_uncertainty
        info["would_halt"] = threshold is not None and info["uncertainty"] > threshold
        return result.observation, float(result.reward), bool(result.done), bool(info["truncated"]), info


def register_envs() -> None:
    """Register ``reverie/Dream-v0`` with gymnasium (once; a second call changes nothing)."""
    if ENV_ID not in gymnasium.registry:
        gymnasium.register(id=ENV_ID, entry_point="imagination.gym_dream:DreamGymEnv")


register_envs()
