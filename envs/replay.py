"""Snapshots by replay: for an env that is deterministic given its reset seed and has no state API.

A snapshot holds the reset seed, the actions taken since and the observation each returned.
Restoring resets a fresh episode with the seed, steps the actions again and checks every
observation against the recorded one, so an env that turns out not to be deterministic (a hidden
draw from an unseeded source, a clock) is refused with :class:`ReplayDivergedError` instead of
silently branching from another state. Cost: restoring turn ``k`` replays ``k`` steps.

Use: keep a :class:`ReplayLog`, call ``log.start`` in ``reset`` and ``log.record`` in ``step``, and
have ``snapshot`` / ``restore`` call :func:`replay_snapshot` / :func:`restore_by_replay`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from envs.base import Env, EnvSnapshot, ensure_started, snapshot_state


class ReplayDivergedError(RuntimeError):
    """Replaying a snapshot's actions did not give back its recorded observations."""


@dataclass
class ReplayLog:
    """Everything needed to replay the current episode: its seed, actions and observations."""

    seed: int | None = None
    actions: list[str] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)  # [0]: reset's; [i + 1]: after actions[i]

    def start(self, seed: int, observation: str) -> None:
        self.seed, self.actions, self.observations = seed, [], [observation]

    def record(self, action: str, observation: str) -> None:
        self.actions.append(action)
        self.observations.append(observation)

    def as_state(self) -> dict[str, Any]:
        return {"seed": self.seed, "actions": list(self.actions), "observations": list(self.observations)}


def replay_snapshot(env: Env, log: ReplayLog, options: dict[str, Any]) -> EnvSnapshot:
    """A snapshot of ``env``'s episode so far (its seed and actions); after ``reset`` only."""
    ensure_started(log.seed is not None, env.name, "snapshot")
    return EnvSnapshot.take(env.name, options, log.as_state())


def restore_by_replay(env: Env, snapshot: object, options: dict[str, Any]) -> None:
    """Put ``env`` where ``snapshot`` was taken: reset with its seed, replay its actions, check each observation.

    ``env.reset`` / ``env.step`` are the env's own, so its ``ReplayLog`` ends up equal to the snapshot's.
    """
    state = snapshot_state(snapshot, env.name, options)
    observation = env.reset(state["seed"])
    _check(env, 0, None, observation, state["observations"][0])
    for turn, action in enumerate(state["actions"]):
        observation = env.step(action).observation
        _check(env, turn + 1, action, observation, state["observations"][turn + 1])


def _check(env: Env, index: int, action: str | None, got: str, recorded: str) -> None:
    if got != recorded:
        after = "reset" if action is None else f"action {index} ({action!r})"
        raise ReplayDivergedError(
            f"{env.name}: replaying the snapshot, {after} gave {got!r} where the recording has {recorded!r}; "
            "the env is not determined by its reset seed and actions, so it cannot be snapshotted by replay"
        )
