"""The disagreement-scale benchmark fits on train tasks and scores on held-out eval tasks."""

from __future__ import annotations

from benchmarks.disagreement_scale import episodes
from envs.splits import split_seeds

LAKE = {"size": 4}


def test_train_and_held_out_episodes_play_disjoint_tasks():
    train = episodes("frozen_lake", LAKE, 6, "train", 0)
    held = episodes("frozen_lake", LAKE, 6, "eval", 0)
    first = lambda ts: {t.turns[0].observation for t in ts}  # noqa: E731  (a random map is its first grid)
    assert len(train) == len(held) == 6
    assert {t.seed for t in train} == set(split_seeds("frozen_lake", LAKE, "train", seed=0, count=6))
    assert not first(train) & first(held)


def test_a_shifted_fit_takes_random_episodes_and_scores_expert_ones():
    random_only = episodes("hidden_number", {"n": 5, "max_turns": 3}, 4, "train", 0, ("random",))
    expert_only = episodes("hidden_number", {"n": 5, "max_turns": 3}, 4, "eval", 0, ("expert",))
    assert len(random_only) == len(expert_only) == 4
    assert all(t.success for t in expert_only)  # the scripted binary search always finds the number
