"""Fitting the LM world model on a run's store: a short fit learns a deterministic env's answers."""

from __future__ import annotations

import torch

from envs import RandomAgent, TrajectoryStore, collect
from tests.world_model.lm.conftest import ENV, tiny_lm_world_model
from world_model.fitting import fit_any, refit_any_on_store
from world_model.lm.fit import training_rows
from world_model.metrics import one_step_accuracy


def test_training_rows_are_the_played_turns_with_their_windowed_history():
    episodes = collect(RandomAgent(0), ENV, group_size=2, group_seeds=[3], progress=False)
    model = tiny_lm_world_model(history_turns=1)
    rows = training_rows(model, episodes)
    turns = [turn for t in episodes for turn in t.turns]
    assert len(rows) == len(turns)
    assert rows.rewards.tolist() == [turn.reward for turn in turns]
    assert rows.targets[0] == model.codec.targets([turns[0].next_observation])[0]
    # the third turn's prompt holds only the second turn (window 1) besides the first observation
    t = episodes[0]
    if t.num_turns >= 3:
        state = model.observe(model.initial_state([t.turns[0].observation]), [t.turns[1].action],
                              [t.turns[1].next_observation])
        assert rows.prompts[2] == model.codec.prompts(state.first, state.turns, [t.turns[2].action])[0]


def test_a_short_fit_on_the_store_reaches_a_held_out_exact_match_an_unfitted_model_does_not(tmp_path):
    # One env seed: the hidden number is fixed, so every answer is a function of the action.
    train = collect(RandomAgent(0), ENV, group_size=40, group_seeds=[3], progress=False)
    held_out = collect(RandomAgent(1), ENV, group_size=10, group_seeds=[3], progress=False)
    store = TrajectoryStore(tmp_path / "store")
    store.append(train)
    model = tiny_lm_world_model(members=2, history_turns=0)
    before = one_step_accuracy(model, held_out)
    assert before.exact_match == 0.0
    metrics = refit_any_on_store(model, store, steps=200, batch_size=8, lr=5e-3, seed=0)
    assert metrics["steps"] == 200 and metrics["trajectories"] == 40
    after = one_step_accuracy(model, held_out)
    assert after.exact_match > 0.3, after


def test_fits_are_deterministic_and_leave_the_global_rng_alone():
    train = collect(RandomAgent(0), ENV, group_size=6, group_seeds=[3], progress=False)
    weights = []
    for _ in range(2):
        model = tiny_lm_world_model(members=2)
        torch.manual_seed(123)
        fit_any(train, [], model, max_steps=3, batch_size=2, lr=1e-3, seed=5, score_train=False)
        drawn = torch.rand(1)
        torch.manual_seed(123)
        assert torch.equal(drawn, torch.rand(1))  # the fit drew nothing from the global RNG
        weights.append([p.detach().clone() for p in model.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*weights, strict=True))
