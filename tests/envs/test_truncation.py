"""Truncation is not termination: an episode stopped by a turn cap is marked truncated, not done."""

import pytest

from envs import ExpertAgent, RandomAgent, collect, make

# An action each env parses but that never finishes the task from the start state.
STALLING = {"hidden_number": "guess 1", "frozen_lake": "Up", "sokoban": "Up", "minishop": "search[nothing]"}


class Repeat:
    def __init__(self, action):
        self.action = action

    def act(self, views):
        return [self.action for _ in views]


@pytest.mark.parametrize("name", list(STALLING))
def test_the_env_marks_its_own_turn_cap_as_truncated(name):
    stalled = 0
    for seed in range(10):
        env = make(name, max_turns=3)
        env.reset(seed)
        results = [env.step(STALLING[name])]
        while not results[-1].done:
            results.append(env.step(STALLING[name]))
        if results[-1].info["success"]:  # e.g. the hidden number was 1, or one move solved the room
            continue
        stalled += 1
        assert [r.done for r in results] == [False, False, True]
        assert [r.info["truncated"] for r in results] == [False, False, True]
    assert stalled >= 5


@pytest.mark.parametrize("name", list(STALLING))
def test_collect_records_a_cap_as_truncation_and_a_terminal_state_as_done(name):
    stalled = collect(Repeat(STALLING[name]), name, env_kwargs={"max_turns": 3}, group_size=1, group_seeds=[1, 2],
                      progress=False)
    for trajectory in stalled:
        if trajectory.success:
            continue
        assert trajectory.truncated and not trajectory.turns[-1].done and trajectory.num_turns == 3
    solved = collect(ExpertAgent(), name, group_size=1, group_seeds=[1, 2], progress=False)
    assert all(t.success and t.turns[-1].done and not t.truncated for t in solved)


def test_a_shorter_collect_cap_truncates_too():
    trajectories = collect(RandomAgent(seed=0), "sokoban", group_size=1, group_seeds=[3], max_turns=2, progress=False)
    assert trajectories[0].num_turns <= 2
    assert trajectories[0].truncated == (not trajectories[0].turns[-1].done)
