"""The environment contract, split by what an environment can offer.

- :class:`Env`, the core every environment meets, a learned world model included: text in, text
  out. ``reset(seed)`` returns the first observation; ``step(action)`` returns a
  :class:`StepResult`. A malformed action never raises: the env answers with an error observation
  that states the valid format, counts the turn, and sets ``info["valid"] = False``. Stepping after
  the episode is done raises :class:`EpisodeDoneError`. An env's own turn budget is part of its
  task (the agent fails when it runs out of turns), so reaching it is ``done``; a cut-off imposed
  from outside, such as ``collect(max_turns=...)`` below that budget, is a truncation instead.
- :class:`ExpertEnv`: a scripted expert (``expert_action``). Optional: an env brought from
  elsewhere rarely has one, and a policy can be warm-started from recorded transcripts instead,
  or start without a warm start (see the docs on adapters).
- :class:`ScriptedEnv`: the extras a hand-written simulator can give because it knows its own
  state: random well-formed actions, its vocabulary, the anchor observation.
- :class:`SnapshotEnv`: ``snapshot()`` / ``restore()`` of the whole episode state, so rollouts can
  branch from a real mid-episode state. A snapshot is an :class:`EnvSnapshot`.
- :class:`TaskEnv`: ``task_key()``, what identifies the current episode's task, so training and
  evaluation tasks can be kept apart (``envs.splits``).
- :class:`RealEnv`: all of the above; every hand-written environment in ``envs.registry`` is one.
  The adapters there offer what the wrapped env allows; each env declares what it offers
  (``capabilities``, ``envs.capabilities``).

Environments are seeded by their own ``random.Random``, never by global state.
"""

from __future__ import annotations

import copy
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


@dataclass(frozen=True)
class EnvSnapshot:
    """The whole state of one env's episode, as a plain value.

    ``env_name`` and ``options`` (the env's constructor options, normalised) say which envs can
    take it back: ``restore`` refuses any other with a ValueError. ``state`` is the env's own dict
    of everything that shapes what comes next: the episode's task, position, turn counter, done
    flag, and the state of the env's ``random.Random`` where it draws from one. It is deep-copied
    when taken and again when restored, so neither later steps nor a restored episode change it and
    one snapshot can be restored any number of times, into the same instance or a fresh one.
    """

    env_name: str
    options: dict[str, Any]
    state: dict[str, Any]

    @classmethod
    def take(cls, env_name: str, options: dict[str, Any], state: dict[str, Any]) -> EnvSnapshot:
        """A snapshot holding deep copies of ``options`` and ``state``."""
        return cls(env_name, copy.deepcopy(options), copy.deepcopy(state))


@runtime_checkable
class Env(Protocol):
    """A seeded, text-in text-out environment for a multi-turn agent: the core contract."""

    name: str
    max_turns: int

    def reset(self, seed: int) -> str:
        """Start a new episode drawn from ``seed``; return the first observation."""
        ...

    def step(self, action: str) -> StepResult:
        """Apply the agent's action text. ``info["valid"]`` says whether it parsed."""
        ...


@runtime_checkable
class ExpertEnv(Env, Protocol):
    """An env with a scripted expert: what a warm start from expert episodes needs."""

    def expert_action(self) -> str:
        """The scripted expert's next action in the current state."""
        ...


@runtime_checkable
class ScriptedEnv(Env, Protocol):
    """An env that knows its own state well enough to script agents and name its words."""

    def random_action(self, rng: random.Random) -> str:
        """A well-formed action drawn uniformly from a sensible set, using ``rng`` only."""
        ...

    def anchor_observation(self) -> str:
        """The raw current observation without history: the key GiGPO groups steps on."""
        ...

    def vocabulary(self) -> list[str]:
        """Every word this env's observations and valid actions can contain."""
        ...


@runtime_checkable
class SnapshotEnv(Env, Protocol):
    """An env whose episode can be saved mid-way and resumed, to branch rollouts from real states."""

    def snapshot(self) -> EnvSnapshot:
        """The whole current episode state (see :class:`EnvSnapshot`); after ``reset`` only."""
        ...

    def restore(self, snapshot: EnvSnapshot) -> None:
        """Continue exactly from ``snapshot``, done or not; ValueError if another env or other options took it."""
        ...


@runtime_checkable
class TaskEnv(Env, Protocol):
    """An env that can say which task its current episode poses."""

    def task_key(self) -> str | None:
        """A string equal for two episodes iff they pose the same task; after ``reset`` only.

        None when the env has no observable task distribution: every episode starts from the same
        observation and differs only in hidden chance, so there is no task a policy could memorise.
        """
        ...


@runtime_checkable
class RealEnv(ExpertEnv, ScriptedEnv, SnapshotEnv, TaskEnv, Protocol):
    """A hand-written simulator with every extra: what ``envs.registry.make`` builds."""


def ensure_not_done(done: bool, env_name: str) -> None:
    """Raise a clear error when an episode is stepped after it ended."""
    if done:
        raise EpisodeDoneError(f"{env_name}: step() called after the episode ended; call reset(seed) first")


def snapshot_state(snapshot: object, env_name: str, options: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of ``snapshot.state``, checked to come from env ``env_name`` built with ``options``."""
    if not isinstance(snapshot, EnvSnapshot):
        raise ValueError(f"{env_name}: restore() needs an EnvSnapshot, got {type(snapshot).__name__}")
    if snapshot.env_name != env_name:
        raise ValueError(f"{env_name}: cannot restore a snapshot of environment {snapshot.env_name!r}")
    if snapshot.options != options:
        raise ValueError(f"{env_name}: snapshot was taken with options {snapshot.options}, this env has {options}")
    return copy.deepcopy(snapshot.state)


def ensure_started(started: bool, env_name: str, method: str) -> None:
    """Raise a clear error when ``method`` needs an episode and ``reset`` was never called."""
    if not started:
        raise RuntimeError(f"{env_name}: {method}() needs an episode; call reset(seed) first")
