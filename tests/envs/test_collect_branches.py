"""collect(branches=...): episodes restored to a recorded mid-episode state by replaying its actions."""

from __future__ import annotations

import pytest

from envs.agent import ExpertAgent, RandomAgent
from envs.collect import BranchReplayError, collect, count_env_steps
from envs.trajectory import Trajectory
from tests.envs.fake_env import GuessEnv, ScriptedAgent, count_up

# Env seed 4: the fake env's target is 4 % 9 + 1 = 5, so counting up plays five turns, the
# first four answered "higher" and the last "correct".
SEED = 4


def recorded() -> Trajectory:
    (traj,) = collect(ScriptedAgent(count_up), GuessEnv, group_seeds=[SEED], group_size=1, progress=False)
    assert [t.next_observation for t in traj.turns] == ["higher"] * 4 + ["correct"]
    return traj


def branch(agent, branches, **kwargs) -> list[Trajectory]:
    return collect(agent, GuessEnv, branches=branches, progress=False, **{"group_size": 1, **kwargs})


class Replay:
    """Plays the recorded trajectory's action for the turn each view is at."""

    def __init__(self, traj: Trajectory) -> None:
        self.traj = traj

    def act(self, views):
        return [self.traj.turns[len(view.turns)].action for view in views]


def test_a_group_starts_after_the_prefix_and_sees_it_as_history() -> None:
    original = recorded()
    seen = []

    def remember_then_count_up(view) -> str:
        seen.append((len(view.turns), view.observation))
        return count_up(view)

    trajs = branch(ScriptedAgent(remember_then_count_up), [(original, 2)], group_size=3)
    assert seen[:3] == [(2, "higher")] * 3  # first call: every member at the restored state
    assert [(t.group_id, t.trajectory_id, t.seed, t.branch_turn) for t in trajs] == [
        (0, 0, SEED, 2),
        (0, 1, SEED, 2),
        (0, 2, SEED, 2),
    ]
    # Counting up from the restored state guesses 3, 4, 5: the original episode again, anchors
    # included ("t=2 hint=higher" first), which only holds if the env's state was restored.
    assert all(t.turns == original.turns and t.success and not t.truncated for t in trajs)
    assert count_env_steps(trajs) == 3 * 3  # the prefix is restored, not played
    trajs[0].turns[0].action = "edited"
    assert original.turns[0].action == "guess 1" and trajs[1].turns[0].action == "guess 1"  # copies


def test_each_branch_is_its_own_group() -> None:
    original = recorded()
    trajs = branch(ExpertAgent(), [(original, 0), (original, 3)], group_size=2, first_group_id=7)
    assert [t.group_id for t in trajs] == [7, 7, 8, 8]
    assert [t.branch_turn for t in trajs] == [0, 0, 3, 3]
    assert [t.num_turns for t in trajs] == [1, 1, 4, 4]  # the expert guesses 5 at once
    assert [t.turns[-1].action for t in trajs] == ["guess 5"] * 4
    assert count_env_steps(trajs) == 4


def test_the_turn_cap_counts_the_prefix() -> None:
    (traj,) = branch(ScriptedAgent(count_up), [(recorded(), 2)], max_turns=3)
    assert traj.num_turns == 3 and traj.turns[-1].action == "guess 3"
    assert traj.truncated and not traj.turns[-1].done
    with pytest.raises(ValueError, match="no turn to play under the cap of 2"):
        branch(ScriptedAgent(count_up), [(recorded(), 2)], max_turns=2)


def test_a_stochastic_env_replays_exactly_from_its_reset_seed() -> None:
    """Slippery FrozenLake draws every move's slip from the RNG reset seeds: replaying the prefix
    must restore that RNG too, or the recorded continuation would not come out again."""
    kwargs = {"size": 4, "is_slippery": True, "max_turns": 12}
    originals = collect(
        RandomAgent(seed=3),
        "frozen_lake",
        env_kwargs=kwargs,
        n_groups=8,
        group_size=1,
        seed=0,
        progress=False,
    )
    original = max(originals, key=lambda t: t.num_turns)
    assert original.num_turns >= 4 and all(t.valid for t in original.turns)
    k = original.num_turns // 2
    (again,) = collect(
        Replay(original),
        "frozen_lake",
        env_kwargs=kwargs,
        branches=[(original, k)],
        group_size=1,
        progress=False,
    )
    assert again.turns == original.turns
    assert (again.success, again.truncated, again.branch_turn) == (original.success, original.truncated, k)


def test_a_recording_the_env_does_not_reproduce_raises() -> None:
    tampered = recorded()
    tampered.turns[1].next_observation = "lower"
    with pytest.raises(
        BranchReplayError, match=r"turn 1 \('guess 2'\).*'higher'.*the recording has \('lower'"
    ):
        branch(ExpertAgent(), [(tampered, 3)])
    branch(ExpertAgent(), [(tampered, 1)])  # the prefix before the edit still replays

    class Unseeded(GuessEnv):
        def reset(self, seed: int) -> str:
            observation = super().reset(seed)
            self.target = 2  # not drawn from the seed
            return observation

    with pytest.raises(BranchReplayError, match="turn 1.*not determined by its reset seed"):
        collect(ExpertAgent(), Unseeded, branches=[(recorded(), 3)], group_size=1, progress=False)

    moved = recorded()
    moved.seed = 13  # reset draws a different episode
    with pytest.raises(BranchReplayError, match="reset gave 'episode 13"):
        branch(ExpertAgent(), [(moved, 1)])


def test_impossible_branches_are_refused() -> None:
    original = recorded()
    with pytest.raises(ValueError, match="at turn 6: it has 5 turns"):
        branch(ExpertAgent(), [(original, 6)])
    with pytest.raises(ValueError, match="at turn 5: the episode ended there"):
        branch(ExpertAgent(), [(original, 5)])
    with pytest.raises(ValueError, match=r"recorded on 'fake_guess' with \{\}, but this collect builds"):
        branch(ExpertAgent(), [(original, 1)], env_kwargs={"max_turns": 6})
    with pytest.raises(ValueError, match="seed is only used with n_groups"):
        branch(ExpertAgent(), [(original, 1)], seed=0)
