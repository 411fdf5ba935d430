"""Taxi as text (envs/taxi_text.py) behind the gymnasium adapter: a hand-worked episode, gymnasium's
own transition table as the reference for the dynamics, the expert as short as a breadth-first search
over gymnasium's table, held-out starts, and a vocabulary that covers what is rendered."""

from __future__ import annotations

from collections import deque

import pytest

from envs.registry import make
from envs.splits import split_seeds
from envs.taxi_text import TaxiText
from tests.envs.episode_words import words_missing_from_vocabulary

TAXI = {"entry_point": "envs.taxi_text:TaxiText"}

# Seed 1 by hand: the taxi at row 1, column 0, the passenger at Y, going to B.
SEED_1 = "\n".join([
    "R : _ | _ : _ : G",
    "T : _ | _ : _ : _",
    "_ : _ : _ : _ : _",
    "_ | _ : _ | _ : _",
    "Y | _ : _ | B : _",
    "passenger Y . destination B",
])
# Down to Y, pick up, and since walls close row 3 and row 4 between columns 0|1 and 2|3, back up
# to row 2, east to column 3, down to B: 12 actions, the shortest.
SEED_1_PLAN = ["South", "South", "South", "Pickup", "North", "North", "East", "East", "East", "South", "South",
               "Dropoff"]
AT_Y_WITH_PASSENGER = "\n".join([
    "R : _ | _ : _ : G",
    "_ : _ | _ : _ : _",
    "_ : _ : _ : _ : _",
    "_ | _ : _ | _ : _",
    "T | _ : _ | B : _",
    "passenger T . destination B",
])


def taxi(**options):
    return make("gym_text", **TAXI, **options)


def test_a_hand_worked_episode():
    env = taxi()
    assert env.reset(1) == SEED_1
    assert env.expert_action() == "South"
    results = [env.step(action) for action in SEED_1_PLAN[:4]]
    assert results[-1].observation == AT_Y_WITH_PASSENGER
    assert all(r.reward == 0.0 and not r.done and r.info["valid"] for r in results)
    blocked = env.step("East")  # the wall right of Y
    assert blocked.observation == AT_Y_WITH_PASSENGER and blocked.info["valid"]
    results = [env.step(action) for action in SEED_1_PLAN[4:]]
    assert [r.done for r in results] == [False] * 7 + [True]
    last = results[-1]
    assert last.reward == 1.0 and last.info["success"] and not last.info["truncated"]
    assert last.observation.endswith("passenger B . destination B")


def test_malformed_actions_are_invalid_turns_and_the_time_limit_truncates():
    env = taxi(kwargs={"time_limit": 3})
    env.reset(1)
    first = env.step("drive home")
    assert not first.info["valid"] and first.reward == 0.0 and not first.done
    assert first.observation == "invalid action . answer South , North , East , West , Pickup or Dropoff\n" + SEED_1
    assert env.step("  north ").info["valid"]  # any case, outer spaces
    last = env.step("Pickup")  # no passenger here: nothing happens
    assert last.info["truncated"] and not last.done and not last.info["success"]


def gymnasium_taxi():
    toy_text = pytest.importorskip("gymnasium.envs.toy_text.taxi")
    return toy_text.TaxiEnv()  # dry, as Taxi-v3 and -v4 by default


def play_state(env, row, col, passenger, destination):
    """Put a TaxiText in a state, as a reset would (the state is private, the test knows its layout)."""
    env._state = (row, col, passenger, destination)


def test_every_transition_is_gymnasiums():
    reference = gymnasium_taxi()
    env = TaxiText()
    names = ["South", "North", "East", "West", "Pickup", "Dropoff"]
    for state in range(500):
        for action in range(6):
            ((_, next_state, reward, terminated),) = reference.P[state][action]
            play_state(env, *reference.decode(state))
            _, ours, done, _, _ = env.step(names[action])
            assert env._state == tuple(reference.decode(next_state)), (reference.decode(state), names[action])
            assert done == terminated and ours == (1.0 if reward == 20 else 0.0)


def test_starts_are_gymnasiums_and_the_expert_is_as_short_as_breadth_first_search():
    reference = gymnasium_taxi()
    starts = [s for s in range(500) if reference.initial_state_distrib[s] > 0]
    assert len(starts) == 300
    for seed in range(60):
        env = TaxiText()
        env.reset(seed=seed)
        state = reference.encode(*env._state)
        assert state in starts
        shortest = bfs_steps(reference, state)
        turns, done = 0, False
        while not done and turns < 30:  # a wandering expert fails here instead of looping
            _, _, done, _, _ = env.step(env.expert_action())
            turns += 1
        assert done and turns == shortest, seed


def bfs_steps(reference, start: int) -> int:
    """Fewest actions to a delivery, searched over gymnasium's transition table."""
    depth, queue = {start: 0}, deque([start])
    while queue:
        state = queue.popleft()
        for action in range(6):
            ((_, nxt, _, terminated),) = reference.P[state][action]
            if terminated:
                return depth[state] + 1
            if nxt not in depth:
                depth[nxt] = depth[state] + 1
                queue.append(nxt)
    raise AssertionError("no delivery reachable")


def task_of(seed: int) -> str:
    env = taxi()
    env.reset(seed)
    return env.task_key()


def test_evaluation_starts_are_never_training_starts():
    assert len({task_of(seed) for seed in (0, 1, 2)}) == 3
    train = {task_of(seed) for seed in split_seeds("gym_text", TAXI, "train", seed=0, count=400)}
    held_out = {task_of(seed) for seed in split_seeds("gym_text", TAXI, "eval", seed=0, count=100)}
    assert train and held_out and not train & held_out
    # 400 training draws cover most of the 240-odd training starts; the held-out ones are about a fifth of 300.
    assert 30 <= len(held_out) <= 90 and len(train) + len(held_out) <= 300


def test_the_vocabulary_covers_every_word_of_expert_and_random_episodes():
    assert words_missing_from_vocabulary(taxi(), range(40), expert_share=0.7) == set()


def test_a_bad_time_limit_names_the_option():
    with pytest.raises(ValueError, match="time_limit"):
        taxi(kwargs={"time_limit": 0})
