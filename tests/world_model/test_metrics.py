"""``one_step_accuracy`` against hand counts: a model made right on chosen turns scores exactly that."""

from __future__ import annotations

import math

import torch

from tests.world_model.conftest import tiny_model
from world_model.metrics import one_step_accuracy
from world_model.state import Predictions, WorldState


def test_scores_every_turn_against_the_recording(hn_tokenizer, hn_trajectories, monkeypatch):
    model = tiny_model(hn_tokenizer)
    turns = [turn for t in hn_trajectories for turn in t.turns]
    calls = []

    def oracle_on_even_turns(states, actions, *, generator, greedy=False):
        assert greedy
        start = sum(len(c) for c in calls)
        calls.append(actions)
        rows = range(start, start + len(actions))
        truth = [turns[i] for i in rows]
        assert list(actions) == [t.action for t in truth]  # the model is asked about the real turns, in order
        # What the model can emit: the real text as its words read back (word caps, word-level split).
        real = [hn_tokenizer.decode(w) for w in hn_tokenizer.observation_words([t.next_observation for t in truth])]
        observations = [text if i % 2 == 0 else "wrong" for i, text in zip(rows, real, strict=True)]
        n = len(actions)
        predictions = Predictions(
            observations=observations, reward=torch.tensor([t.reward + 0.4 for t in truth]),
            done_probability=torch.zeros(n), done=torch.tensor([not t.done for t in truth]),
            uncertainty=torch.zeros(n), reward_std=torch.zeros(n), done_std=torch.zeros(n),
            ended=torch.ones(n, dtype=torch.bool),
        )
        return WorldState(states.latent, tuple(observations)), predictions

    monkeypatch.setattr(model, "step", oracle_on_even_turns)
    score = one_step_accuracy(model, hn_trajectories, batch_size=5)
    assert score.transitions == len(turns)
    assert math.isclose(score.exact_match, len(range(0, len(turns), 2)) / len(turns))
    assert score.reward == 1.0  # off by 0.4 < 0.5 everywhere
    assert score.done == 0.0  # flipped everywhere
    assert set(score.as_metrics()) >= {"wm/one_step_exact_match", "wm/one_step_done_acc"}


def test_no_turns_gives_nan(hn_tokenizer):
    score = one_step_accuracy(tiny_model(hn_tokenizer), [])
    assert score.transitions == 0 and math.isnan(score.exact_match)
