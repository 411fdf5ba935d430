"""Truncation is not termination: a cut-off from outside the task is truncated, not done.

An env's own turn budget belongs to its task (running out of guesses fails the task), so it ends
the episode ``done``; ``collect(max_turns=...)`` below that budget cuts episodes short, and those
are marked truncated with a last turn that is not done.
"""

import pytest

from envs import ExpertAgent, collect, make

# An action each env parses but that rarely finishes the task from the start state.
STALLING = {"hidden_number": "guess 1", "frozen_lake": "Up", "sokoban": "Up", "minishop": "search[nothing]"}


class Repeat:
    def __init__(self, action):
        self.action = action

    def act(self, views):
        return [self.action for _ in views]


@pytest.mark.parametrize("name", list(STALLING))
def test_a_cap_below_the_env_budget_truncates(name):
    budget = make(name).max_turns
    assert budget > 2
    trajectories = collect(Repeat(STALLING[name]), name, group_size=1, group_seeds=list(range(8)), max_turns=2,
                           progress=False)
    cut = [t for t in trajectories if t.num_turns == 2 and not t.turns[-1].done]
    assert len(cut) >= 4
    assert all(t.truncated for t in cut)
    assert all(t.truncated == (not t.turns[-1].done) for t in trajectories)


@pytest.mark.parametrize("name", list(STALLING))
def test_the_env_budget_ends_the_episode_done(name):
    trajectories = collect(Repeat(STALLING[name]), name, env_kwargs={"max_turns": 3}, group_size=1,
                           group_seeds=list(range(8)), progress=False)
    assert all(t.turns[-1].done and not t.truncated for t in trajectories)
    assert sum(not t.success for t in trajectories) >= 4  # most of them ran out of turns


@pytest.mark.parametrize("name", list(STALLING))
def test_a_solved_episode_is_done_not_truncated(name):
    solved = collect(ExpertAgent(), name, group_size=1, group_seeds=[1, 2], progress=False)
    assert all(t.success and t.turns[-1].done and not t.truncated for t in solved)
