"""collect's optional extras for envs that are not replayable simulators (e.g. a world model):
``start_from`` instead of replay, truncation said by the env, and batched stepping."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from envs.base import StepResult
from envs.collect import BatchStepper, collect, count_env_steps
from tests.envs.fake_env import CoreGuessEnv, ScriptedAgent, count_up

SEED = 4  # target 5: counting up takes five turns


class StartFromEnv(CoreGuessEnv):
    """Put at a branch by ``start_from``; replaying (``step`` before any start) would be noticed."""

    def __init__(self) -> None:
        super().__init__()
        self.started_from: list[tuple[int, int]] = []

    def start_from(self, trajectory, k):
        self.started_from.append((trajectory.trajectory_id, k))
        self._inner.reset(trajectory.seed)
        for turn in trajectory.turns[:k]:  # a simulator may restore however it likes
            self._inner.step(turn.action)
        return trajectory.turns[k - 1].next_observation if k else trajectory.turns[0].observation


def recorded():
    (traj,) = collect(ScriptedAgent(count_up), CoreGuessEnv, group_seeds=[SEED], group_size=1, progress=False)
    return traj


def test_start_from_replaces_replay_and_the_prefix_is_copied():
    original = recorded()
    built: list[StartFromEnv] = []

    def make():
        built.append(StartFromEnv())
        return built[-1]

    trajs = collect(ScriptedAgent(count_up), make, branches=[(original, 2)], group_size=2, progress=False)
    assert [env.started_from for env in built] == [[(original.trajectory_id, 2)]] * 2
    assert all(t.turns == original.turns and t.branch_turn == 2 for t in trajs)
    assert count_env_steps(trajs) == 2 * 3


def test_start_from_envs_are_still_checked_against_the_recording():
    original = recorded()

    class Other(StartFromEnv):
        name = "other"

    with pytest.raises(ValueError, match="recorded on 'fake_guess'"):
        collect(ScriptedAgent(count_up), Other, branches=[(original, 1)], group_size=1, progress=False)


class CutAt(CoreGuessEnv):
    """Says ``truncated`` on its turn ``at`` (and ``done`` as the game says)."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.at, self.turns = at, 0

    def reset(self, seed):
        self.turns = 0
        return super().reset(seed)

    def step(self, action):
        result = super().step(action)
        self.turns += 1
        return StepResult(result.observation, result.reward, result.done, {**result.info, "truncated": self.turns == self.at})


def test_an_env_can_end_an_episode_as_a_truncation():
    (traj,) = collect(ScriptedAgent(count_up), lambda: CutAt(2), group_seeds=[SEED], group_size=1, progress=False)
    assert traj.num_turns == 2 and traj.truncated and not traj.turns[-1].done and not traj.success


def test_done_wins_over_the_envs_truncated_flag():
    (traj,) = collect(ScriptedAgent(count_up), lambda: CutAt(5), group_seeds=[SEED], group_size=1, progress=False)
    assert traj.num_turns == 5 and traj.turns[-1].done and not traj.truncated and traj.success


class Stepper:
    """Records each batch it is asked to step."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def step_batch(self, envs: Sequence[Batched], actions: Sequence[str]) -> list[StepResult]:
        self.batches.append(list(actions))
        return [env.step(action) for env, action in zip(envs, actions, strict=True)]


class Batched(CoreGuessEnv):
    def __init__(self, stepper: Stepper | None) -> None:
        super().__init__()
        self.batch_stepper = stepper


def test_envs_sharing_a_stepper_are_stepped_in_one_call_per_round():
    first, second = Stepper(), Stepper()
    assert isinstance(first, BatchStepper)
    steppers = iter([first, first, None, second, first])
    trajs = collect(ScriptedAgent(count_up), lambda: Batched(next(steppers)), group_seeds=[0, 1, 2, 3, 4],
                    group_size=1, progress=False)
    plain = collect(ScriptedAgent(count_up), CoreGuessEnv, group_seeds=[0, 1, 2, 3, 4], group_size=1,
                    progress=False)
    assert [t.turns for t in trajs] == [p.turns for p in plain]
    # Targets 1, 2, 3, 4, 5: envs 0, 1 and 4 share `first`, env 3 has `second`, env 2 steps alone.
    assert first.batches == [["guess 1", "guess 1", "guess 1"], ["guess 2", "guess 2"], ["guess 3"], ["guess 4"],
                             ["guess 5"]]
    assert second.batches == [["guess 1"], ["guess 2"], ["guess 3"], ["guess 4"]]


def test_a_stepper_answering_too_few_results_is_refused():
    class Short(Stepper):
        def step_batch(self, envs, actions):
            return super().step_batch(envs, actions)[:-1]

    stepper = Short()
    with pytest.raises(ValueError, match="step_batch returned 1 results for 2 envs"):
        collect(ScriptedAgent(count_up), lambda: Batched(stepper), group_seeds=[3], group_size=2, progress=False)
