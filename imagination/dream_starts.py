"""Where a dream episode starts: a training task of the env, or a point of a recorded real episode.

Both draws take a numpy ``Generator`` (a gymnasium env's ``np_random``), so the start is a fixed
function of the seed that made it:

- :func:`draw_train_seed`: an env seed of the training split (``envs.splits.split_seeds``), so a
  dream never starts on a task held out for evaluation;
- :func:`draw_store_start`: a real trajectory of the env, chosen uniformly, and a turn of it to
  start after, chosen uniformly among the start (``k = 0``) and its mid-episode branch points
  that the turn budget still leaves a turn to play from.

:func:`task_start_points` gives the training loop branch points at training tasks' start states
when it has no real episode to branch from yet (``imagination.open_at_start``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from envs.splits import TRAIN_SEEDS, split_seeds
from envs.trajectory import Trajectory
from imagination.branching import branchable_turns


def draw_train_seed(env_name: str, env_kwargs: dict[str, Any], rng: np.random.Generator) -> int:
    """One env seed of the training split, drawn with ``rng``."""
    candidates_seed = int(rng.integers(TRAIN_SEEDS.start, TRAIN_SEEDS.stop))
    return split_seeds(env_name, env_kwargs, "train", seed=candidates_seed, count=1)[0]


def task_start_points(
    env_name: str, env_kwargs: dict[str, Any], count: int, *, seed: int
) -> list[tuple[Trajectory, int]]:
    """``count`` branch points ``(trajectory, 0)`` at the start states of distinct training tasks.

    Each trajectory is turn-less, recorded nowhere (ids -1): an env seed of the training split
    (``split_seeds(..., "train", seed=seed)``, so a fixed function of ``seed``), which
    ``DreamEnv.start_from(trajectory, 0)`` starts from the real first observation of. That is an env
    reset, not a step: such a start costs no real env step (the ledger counts none).
    """
    seeds = split_seeds(env_name, env_kwargs, "train", seed=seed, count=count)
    return [(Trajectory(env_name, dict(env_kwargs), env_seed, group_id=-1, trajectory_id=-1), 0) for env_seed in seeds]


def matching_trajectories(
    trajectories: Sequence[Trajectory], env_name: str, env_kwargs: dict[str, Any]
) -> list[Trajectory]:
    """The real episodes with turns recorded on env ``env_name`` built with ``env_kwargs``."""
    return [
        t
        for t in trajectories
        if t.source == "real" and t.turns and t.env_name == env_name and t.env_kwargs == env_kwargs
    ]


def start_turns(trajectory: Trajectory, max_turns: int) -> list[int]:
    """The turns a dream can start after: 0 and each branch point below the turn budget."""
    return [0] + [k for k in branchable_turns(trajectory) if k < max_turns]


def draw_store_start(
    trajectories: Sequence[Trajectory], max_turns: int, rng: np.random.Generator
) -> tuple[Trajectory, int]:
    """A trajectory of ``trajectories`` and a turn to start after, both uniform, drawn with ``rng``."""
    if not trajectories:
        raise ValueError("no real trajectory to start a dream from")
    trajectory = trajectories[int(rng.integers(len(trajectories)))]
    turns = start_turns(trajectory, max_turns)
    return trajectory, turns[int(rng.integers(len(turns)))]
