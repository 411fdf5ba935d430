"""Roll an agent out in an environment: groups of episodes, stepped in lock-step batches.

Group ``g`` resets every one of its ``group_size`` episodes with the env seed
``group_env_seed(seed, g)``, so members of a group start from the same state (what GRPO-style
group baselines compare). All episodes run together: each step the agent's batched ``act`` is
called once with a view of every episode still running.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from tqdm import tqdm

from envs.agent import Agent, AgentView
from envs.base import Env
from envs.trajectory import Source, Trajectory, Turn

_SEED_STRIDE = 1_000_003  # a prime larger than any sensible n_groups: seeds of different `seed`s never meet


def group_env_seed(seed: int, group: int) -> int:
    """The env seed group ``group`` resets with, derived from the run's ``seed``."""
    return seed * _SEED_STRIDE + group


def count_env_steps(trajectories: list[Trajectory], source: Source | None = "real") -> int:
    """Env steps (turns) in the trajectories of ``source`` (``None``: all); by default real steps only."""
    return sum(t.num_turns for t in trajectories if source is None or t.source == source)


def collect(
    agent: Agent,
    env_name_or_factory: str | Callable[[], Env],
    *,
    n_groups: int,
    group_size: int,
    seed: int,
    max_turns: int | None = None,
    env_kwargs: dict[str, Any] | None = None,
    source: Source = "real",
    progress: bool = True,
) -> list[Trajectory]:
    """Run ``n_groups * group_size`` episodes and return them ordered by ``trajectory_id``.

    ``env_name_or_factory`` is a registry name (built with ``envs.registry.make(name, **env_kwargs)``)
    or a zero-argument callable returning a fresh env; with a callable, ``env_kwargs`` is only
    recorded on the trajectories. An episode ends when the env says done or after ``max_turns``
    turns (default: the env's own ``max_turns``); a cut-off episode's last turn keeps ``done=False``.
    ``success`` is the last step's ``info["success"]`` (False if absent); a turn's ``valid`` is
    ``info["valid"]`` (True if absent); the anchor observation is read before the agent acts.
    """
    if n_groups < 0 or group_size < 1:
        raise ValueError(f"need n_groups >= 0 and group_size >= 1, got {n_groups} and {group_size}")
    if source not in ("real", "imagined"):
        raise ValueError(f"source must be 'real' or 'imagined', got {source!r}")
    if max_turns is not None and max_turns < 1:
        raise ValueError(f"max_turns must be at least 1, got {max_turns}")
    env_kwargs = dict(env_kwargs or {})
    make_env = _env_factory(env_name_or_factory, env_kwargs)

    envs: list[Env] = []
    trajectories: list[Trajectory] = []
    observations: list[str] = []
    for group in range(n_groups):
        env_seed = group_env_seed(seed, group)
        for _ in range(group_size):
            env = make_env()
            observations.append(env.reset(env_seed))
            envs.append(env)
            trajectories.append(
                Trajectory(
                    env_name=env.name,
                    env_kwargs=dict(env_kwargs),
                    seed=env_seed,
                    group_id=group,
                    trajectory_id=len(trajectories),
                    source=source,
                )
            )
    limits = [max_turns if max_turns is not None else env.max_turns for env in envs]

    bar = tqdm(
        total=len(envs), desc="episodes", unit="ep", disable=None if progress else True, file=sys.stderr
    )
    active = list(range(len(envs)))
    while active:
        anchors = [envs[i].anchor_observation() for i in active]  # before acting: the state acted in
        views = [
            AgentView(env=envs[i], turns=list(trajectories[i].turns), observation=observations[i])
            for i in active
        ]
        actions = agent.act(views)
        if len(actions) != len(views):
            raise ValueError(f"agent.act returned {len(actions)} actions for {len(views)} views")
        still_active = []
        for i, action, anchor in zip(active, actions, anchors, strict=True):
            if not isinstance(action, str):
                raise TypeError(f"agent.act must return strings, got {type(action).__name__}")
            result = envs[i].step(action)
            traj = trajectories[i]
            traj.turns.append(
                Turn(
                    observation=observations[i],
                    action=action,
                    next_observation=result.observation,
                    reward=float(result.reward),
                    done=bool(result.done),
                    valid=bool(result.info.get("valid", True)),
                    anchor_observation=anchor,
                )
            )
            observations[i] = result.observation
            if result.done or traj.num_turns >= limits[i]:
                traj.success = bool(result.info.get("success", False))
                bar.update(1)
            else:
                still_active.append(i)
        active = still_active
    bar.close()
    return trajectories


def _env_factory(
    env_name_or_factory: str | Callable[[], Env], env_kwargs: dict[str, Any]
) -> Callable[[], Env]:
    if isinstance(env_name_or_factory, str):
        from envs.registry import make  # resolved lazily: the registry imports every environment

        name = env_name_or_factory
        return lambda: make(name, **env_kwargs)
    if callable(env_name_or_factory):
        return env_name_or_factory
    raise TypeError(f"expected an env name or a zero-argument env factory, got {env_name_or_factory!r}")
