"""Roll an agent out in an environment: groups of episodes, stepped in lock-step batches.

Every group has one start state, shared by its ``group_size`` episodes (what GRPO-style group
baselines compare). The start states come from exactly one of:

- ``n_groups`` and ``seed``: group ``g`` resets with ``group_env_seed(seed, g)``;
- ``group_seeds``: group ``g`` resets with ``group_seeds[g]`` (e.g. a chosen training split);
- ``branches``: group ``g`` starts after the first ``k`` turns of a recorded trajectory, given as
  ``(trajectory, k)``. A fresh env is reset with ``trajectory.seed`` and the ``k`` recorded actions
  are replayed; every answer must equal the recording, else ``BranchReplayError`` (an env whose RNG
  is seeded by ``reset`` replays exactly). Replaying restores a state, like a snapshot restore: it is
  not new experience, so ``count_env_steps`` leaves those ``k`` turns out.

All episodes run together: each step the agent's batched ``act`` is called once with a view of
every episode still running.

Three optional env extras, for envs that are not replayable simulators (a learned world model,
``imagination.DreamEnv``); an env without them is handled as above:

- **Branch start without replay.** An env with a method ``start_from(trajectory, k) -> str`` is put
  at a branch by that call (it returns the observation after the ``k``-th turn) instead of being
  reset and replayed; a model env must not "replay" by sampling. The prefix is copied and left out
  of ``count_env_steps`` just the same.
- **Truncation by the env.** A step whose ``info["truncated"]`` is True (and that is not ``done``)
  ends the episode as a truncation: ``truncated=True``, the last turn not done, so a critic
  bootstraps there. For cut-offs the env imposes on itself that are not part of the task, such as
  an imagination horizon or halting where the model is unsure.
- **Batched stepping** (:class:`BatchStepper`). An env whose attribute ``batch_stepper`` is not None
  is stepped through that object: every round, the running envs sharing one stepper (the same
  object) are stepped by one call ``stepper.step_batch(envs, actions)``, in the order of their
  trajectory ids; it returns one ``StepResult`` per env, as ``env.step`` would have. Envs without
  a stepper are stepped one by one. What the stepper's randomness gives each env is the stepper's
  business (``imagination.DreamStepper`` documents its seeding).

**An env that raises.** By default an exception from ``env.step`` propagates (the collection
stops). Given ``on_env_error``, an env whose ``step`` raises ends that episode there: it is marked
failed by an ``EnvFailure`` (its seed, the turn, the action, the error and the turns played before)
passed to ``on_env_error``, left out of the returned trajectories (it is neither stored nor trained
on: its end is the env's fault, not the agent's), and the other episodes go on. Its trajectory id
is still used, so ids stay unique when the caller counts on from ``first_trajectory_id``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

from tqdm import tqdm

from envs.agent import Agent, AgentView
from envs.base import Env, StepResult
from envs.step_timeout import step_within
from envs.trajectory import SampledAction, Source, Trajectory, Turn

_SEED_STRIDE = 1_000_003  # a prime larger than any sensible n_groups: seeds of different `seed`s never meet


@dataclass(frozen=True)
class EnvFailure:
    """An episode ended by its env raising inside ``step``."""

    trajectory: Trajectory  # the turns played before the failing step
    turn: int  # index of the turn whose step raised
    action: str
    error: Exception

    def describe(self) -> str:
        t = self.trajectory
        return (f"env {t.env_name} (seed {t.seed}) raised inside step at turn {self.turn} on action {self.action!r}: "
                f"{type(self.error).__name__}: {self.error}; trajectory {t.trajectory_id} of group {t.group_id} "
                "marked failed and left out")


class BranchReplayError(RuntimeError):
    """Replaying a branch prefix did not reproduce the recorded trajectory."""


@runtime_checkable
class BatchStepper(Protocol):
    """Steps several envs at once; an env opts in with a ``batch_stepper`` attribute holding one."""

    def step_batch(self, envs: Sequence[Env], actions: Sequence[str]) -> list[StepResult]:
        """One ``StepResult`` per env, in order: what ``envs[i].step(actions[i])`` would answer."""
        ...


def group_env_seed(seed: int, group: int) -> int:
    """The env seed group ``group`` resets with, derived from the run's ``seed``."""
    return seed * _SEED_STRIDE + group


def count_env_steps(trajectories: list[Trajectory], source: Source | None = "real") -> int:
    """Env steps played in the trajectories of ``source`` (``None``: all); by default real steps only.

    A restored branch prefix (``turns[:branch_turn]``) is not counted: it was played, and counted,
    in the trajectory it was copied from.
    """
    return sum(t.num_turns - t.branch_turn for t in trajectories if source is None or t.source == source)


def collect(
    agent: Agent,
    env_name_or_factory: str | Callable[[], Env],
    *,
    group_size: int,
    n_groups: int | None = None,
    seed: int | None = None,
    group_seeds: Sequence[int] | None = None,
    branches: Sequence[tuple[Trajectory, int]] | None = None,
    max_turns: int | None = None,
    env_kwargs: dict[str, Any] | None = None,
    source: Source = "real",
    first_group_id: int = 0,
    first_trajectory_id: int = 0,
    progress: bool = True,
    on_env_error: Callable[[EnvFailure], None] | None = None,
    step_timeout_s: float | None = None,
) -> list[Trajectory]:
    """Run ``group_size`` episodes per group and return them ordered by ``trajectory_id``.

    Give the groups' start states by exactly one of ``n_groups`` (with ``seed``), ``group_seeds`` or
    ``branches`` (see the module docstring). Group ``g`` gets ``group_id = first_group_id + g``;
    trajectory ids count up from ``first_trajectory_id``, so successive calls can be given disjoint
    ranges and merged (``merge_trajectories``).

    ``env_name_or_factory`` is a registry name (built with ``envs.registry.make(name, **env_kwargs)``)
    or a zero-argument callable returning a fresh env; with a callable, ``env_kwargs`` is only
    recorded on the trajectories. An episode ends when the env says done, or is truncated when it
    reaches ``max_turns`` turns (default: the env's own ``max_turns``; a branch prefix counts towards
    it), or when the env's step says ``info["truncated"]``; a truncated episode's last turn keeps
    ``done=False`` and the trajectory has ``truncated=True``. ``success`` is the last step's ``info["success"]`` (False if absent); a
    turn's ``valid`` is ``info["valid"]`` (True if absent). The anchor observation is read before the
    agent acts, from ``env.anchor_observation()`` where the env has one, else the observation itself
    (a world-model env offers only ``reset`` / ``step``). The agent may answer with text or with
    ``SampledAction``s; a sample is kept on its turn. ``on_env_error``: see the module docstring
    (None: an env's exception propagates). ``step_timeout_s``: a step still running after that many
    seconds raises ``EnvStepTimeout`` (``envs.step_timeout``), handled like any env exception.
    """
    _check_collect_options(group_size, source, max_turns, first_group_id, first_trajectory_id)
    starts = _group_starts(n_groups, seed, group_seeds, branches)
    env_kwargs = dict(env_kwargs or {})
    make_env = _env_factory(env_name_or_factory, env_kwargs)
    envs, trajectories, observations = _start_episodes(
        starts, group_size, make_env, env_kwargs, source=source, first_group_id=first_group_id,
        first_trajectory_id=first_trajectory_id,
    )
    limits = _turn_limits(envs, trajectories, max_turns)
    bar = tqdm(
        total=len(envs), desc="episodes", unit="ep", disable=None if progress else True, file=sys.stderr
    )
    active = list(range(len(envs)))
    failed: set[int] = set()  # positions whose env raised (only with on_env_error)
    while active:
        anchors = [_anchor(envs[i], observations[i]) for i in active]  # before acting: the state acted in
        texts, samples = _act(agent, envs, trajectories, observations, active)
        results = _step_all([envs[i] for i in active], texts, catch=on_env_error is not None,
                            timeout_s=step_timeout_s)
        active = _record_round(
            trajectories, observations, limits, active, texts, samples, results, anchors,
            failed=failed, on_env_error=on_env_error, bar=bar,
        )
    bar.close()
    return [traj for i, traj in enumerate(trajectories) if i not in failed]


def _check_collect_options(
    group_size: int, source: str, max_turns: int | None, first_group_id: int, first_trajectory_id: int
) -> None:
    if group_size < 1:
        raise ValueError(f"need group_size >= 1, got {group_size}")
    if source not in ("real", "imagined"):
        raise ValueError(f"source must be 'real' or 'imagined', got {source!r}")
    if max_turns is not None and max_turns < 1:
        raise ValueError(f"max_turns must be at least 1, got {max_turns}")
    if first_group_id < 0 or first_trajectory_id < 0:
        raise ValueError(f"first ids must be >= 0, got {first_group_id} and {first_trajectory_id}")


def _start_episodes(
    starts: list[tuple[int, Trajectory | None, int]],
    group_size: int,
    make_env: Callable[[], Env],
    env_kwargs: dict[str, Any],
    *,
    source: Source,
    first_group_id: int,
    first_trajectory_id: int,
) -> tuple[list[Env], list[Trajectory], list[str]]:
    """One env per episode, in group order, put at its group's start state (reset, or a branch
    prefix put in place by a model env or replayed in a real one), and its trajectory so far."""
    envs: list[Env] = []
    trajectories: list[Trajectory] = []
    observations: list[str] = []
    for group, (env_seed, branch, k) in enumerate(starts):
        for _ in range(group_size):
            env = make_env()
            if branch is None:
                observations.append(env.reset(env_seed))
            elif callable(getattr(env, "start_from", None)):  # a model env: put there, never replayed
                _check_branch_env(env, env_kwargs, branch, k)
                observations.append(env.start_from(branch, k))
            else:
                observations.append(_restore(env, env_kwargs, branch, k))
            envs.append(env)
            trajectories.append(
                Trajectory(
                    env_name=env.name,
                    env_kwargs=dict(env_kwargs),
                    seed=env_seed,
                    group_id=first_group_id + group,
                    trajectory_id=first_trajectory_id + len(trajectories),
                    source=source,
                    turns=[] if branch is None else [replace(turn) for turn in branch.turns[:k]],
                    branch_turn=k,
                )
            )
    return envs, trajectories, observations


def _turn_limits(envs: Sequence[Env], trajectories: Sequence[Trajectory], max_turns: int | None) -> list[int]:
    """Each episode's turn cap; a branch must leave at least one turn to play under it."""
    limits = [max_turns if max_turns is not None else env.max_turns for env in envs]
    for traj, limit in zip(trajectories, limits, strict=True):
        if traj.branch_turn >= limit:
            raise ValueError(
                f"a branch at turn {traj.branch_turn} leaves no turn to play under the cap of {limit} turns"
            )
    return limits


def _act(
    agent: Agent, envs: Sequence[Env], trajectories: Sequence[Trajectory], observations: Sequence[str],
    active: Sequence[int],
) -> tuple[list[str], list[SampledAction | None]]:
    """One ``agent.act`` call for every active episode: the action texts and, where the agent
    sampled them, the samples."""
    views = [
        AgentView(env=envs[i], turns=list(trajectories[i].turns), observation=observations[i])
        for i in active
    ]
    actions = agent.act(views)
    if len(actions) != len(views):
        raise ValueError(f"agent.act returned {len(actions)} actions for {len(views)} views")
    samples = [action if isinstance(action, SampledAction) else None for action in actions]
    texts = [a.text if sample is not None else a for a, sample in zip(actions, samples, strict=True)]
    for action, text in zip(actions, texts, strict=True):
        if not isinstance(text, str):
            raise TypeError(f"agent.act must return str or SampledAction, got {type(action).__name__}")
    return texts, samples


def _record_round(
    trajectories: list[Trajectory],
    observations: list[str],
    limits: Sequence[int],
    active: Sequence[int],
    texts: Sequence[str],
    samples: Sequence[SampledAction | None],
    results: Sequence[StepResult | Exception],
    anchors: Sequence[str],
    *,
    failed: set[int],
    on_env_error: Callable[[EnvFailure], None] | None,
    bar: tqdm,
) -> list[int]:
    """Append this round's turns; returns the episodes still running. An env that raised (only
    with ``on_env_error``) is handed to it and its episode dropped (``failed``)."""
    still_active = []
    for i, text, sample, result, anchor in zip(active, texts, samples, results, anchors, strict=True):
        traj = trajectories[i]
        if isinstance(result, Exception):
            failed.add(i)
            on_env_error(EnvFailure(traj, traj.num_turns, text, result))
            bar.update(1)
            continue
        traj.turns.append(
            Turn(
                observation=observations[i],
                action=text,
                next_observation=result.observation,
                reward=float(result.reward),
                done=bool(result.done),
                valid=bool(result.info.get("valid", True)),
                anchor_observation=anchor,
                sample=sample,
            )
        )
        observations[i] = result.observation
        cut_by_env = bool(result.info.get("truncated", False))  # e.g. a model env's horizon
        if result.done or cut_by_env or traj.num_turns >= limits[i]:
            traj.success = bool(result.info.get("success", False))
            traj.truncated = not result.done
            bar.update(1)
        else:
            still_active.append(i)
    return still_active


def _group_starts(
    n_groups: int | None,
    seed: int | None,
    group_seeds: Sequence[int] | None,
    branches: Sequence[tuple[Trajectory, int]] | None,
) -> list[tuple[int, Trajectory | None, int]]:
    """``(env seed, branch trajectory or None, prefix length)`` per group, from the one way given."""
    given = {"n_groups": n_groups, "group_seeds": group_seeds, "branches": branches}
    chosen = [name for name, value in given.items() if value is not None]
    if len(chosen) != 1:
        raise ValueError(
            f"give exactly one of n_groups (with seed), group_seeds or branches; got {chosen or 'none'}"
        )
    if n_groups is not None:
        if seed is None:
            raise ValueError("n_groups needs seed: group g resets with group_env_seed(seed, g)")
        if n_groups < 0:
            raise ValueError(f"need n_groups >= 0, got {n_groups}")
        return [(group_env_seed(seed, g), None, 0) for g in range(n_groups)]
    if seed is not None:  # it would be silently ignored
        raise ValueError(f"seed is only used with n_groups; {chosen[0]} fixes the start states itself")
    if group_seeds is not None:
        return [(int(s), None, 0) for s in group_seeds]
    starts = []
    for traj, k in branches:
        if not 0 <= k <= traj.num_turns:
            raise ValueError(
                f"cannot branch trajectory {traj.trajectory_id} at turn {k}: it has {traj.num_turns} turns"
            )
        if k > 0 and traj.turns[k - 1].done:
            raise ValueError(
                f"cannot branch trajectory {traj.trajectory_id} at turn {k}: the episode ended there"
            )
        starts.append((traj.seed, traj, k))
    return starts


def _step_all(
    envs: Sequence[Env], texts: Sequence[str], *, catch: bool = False, timeout_s: float | None = None
) -> list[StepResult | Exception]:
    """Step each env with its action: envs sharing a ``batch_stepper`` in one call, others one by one.

    ``catch``: an env whose own ``step`` raises gets its exception in place of a result (a batch
    stepper's exception still propagates: it is the model's failure, not one episode's).
    """
    results: list[StepResult | Exception | None] = [None] * len(envs)
    batches: dict[int, tuple[BatchStepper, list[int]]] = {}  # id(stepper) -> (stepper, positions)
    for position, env in enumerate(envs):
        stepper = getattr(env, "batch_stepper", None)
        if stepper is None:
            try:
                results[position] = step_within(env, texts[position], timeout_s)
            except Exception as error:  # noqa: BLE001 - any env bug; the caller decides (on_env_error)
                if not catch:
                    raise
                results[position] = error
        else:
            batches.setdefault(id(stepper), (stepper, []))[1].append(position)
    for stepper, positions in batches.values():
        answers = stepper.step_batch([envs[p] for p in positions], [texts[p] for p in positions])
        if len(answers) != len(positions):
            raise ValueError(f"step_batch returned {len(answers)} results for {len(positions)} envs")
        for position, answer in zip(positions, answers, strict=True):
            results[position] = answer
    return results  # type: ignore[return-value]  # every position is filled


def _check_branch_env(env: Env, env_kwargs: dict[str, Any], branch: Trajectory, k: int) -> None:
    """Refuse to branch a trajectory recorded on another env or with other options."""
    if (env.name, env_kwargs) != (branch.env_name, branch.env_kwargs):
        raise ValueError(
            f"branch from trajectory {branch.trajectory_id} (seed {branch.seed}, turn {k}): it was "
            f"recorded on {branch.env_name!r} with {branch.env_kwargs}, "
            f"but this collect builds {env.name!r} with {env_kwargs}"
        )


def _restore(env: Env, env_kwargs: dict[str, Any], branch: Trajectory, k: int) -> str:
    """Reset ``env`` with ``branch.seed``, replay its first ``k`` actions, and return the observation then."""
    where = f"branch from trajectory {branch.trajectory_id} (seed {branch.seed}, turn {k})"
    _check_branch_env(env, env_kwargs, branch, k)
    observation = env.reset(branch.seed)
    if branch.turns and observation != branch.turns[0].observation:
        raise BranchReplayError(
            f"{where}: reset gave {observation!r}, the recording starts at {branch.turns[0].observation!r}"
        )
    for t, turn in enumerate(branch.turns[:k]):
        result = env.step(turn.action)
        got = (result.observation, float(result.reward), bool(result.done))
        recorded = (turn.next_observation, turn.reward, turn.done)
        if got != recorded:
            raise BranchReplayError(
                f"{where}: replaying turn {t} ({turn.action!r}) gave (observation, reward, done) = {got!r}, "
                f"the recording has {recorded!r}; the env is not determined by its reset seed, "
                "or it is not the env that recorded the trajectory"
            )
        observation = result.observation
    return observation


def _anchor(env: Env, observation: str) -> str:
    read = getattr(env, "anchor_observation", None)  # a scripted extra: core-only envs lack it
    return read() if callable(read) else observation


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
