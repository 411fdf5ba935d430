"""A short fit on hidden_number: held-out loss falls, and the members disagree more off the data.

One fit (full batch, 50 Adam steps on 24 expert and random episodes) is shared by the tests.
"""

import random

import pytest
import torch

from world_model import WorldModel, build_training_batch

from .conftest import hidden_number_trajectories, tiny_model

pytestmark = pytest.mark.slow  # its fixture fits a world model (tens of seconds)


@pytest.fixture(scope="module")
def fitted(hn_tokenizer):
    train = hidden_number_trajectories(seed=0, groups=12)
    held_out = build_training_batch(hidden_number_trajectories(seed=100, groups=6), hn_tokenizer)
    model = tiny_model(hn_tokenizer, seed=0)
    batch = build_training_batch(train, hn_tokenizer)
    optimiser = torch.optim.Adam(model.parameters(), lr=5e-3)
    with torch.no_grad():
        before = model.loss(held_out)
    for _ in range(50):
        loss = model.loss(batch)["loss"]
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    with torch.no_grad():
        after = model.loss(held_out)
    return model.eval(), train, before, after


def test_held_out_loss_falls(fitted):
    _, _, before, after = fitted
    assert after["loss"] < 0.3 * before["loss"]
    for part in ("observation_nll", "reconstruction_nll", "done_bce"):
        assert after[part] < 0.5 * before[part], part


def test_members_disagree_more_on_unfamiliar_histories(fitted, hn_tokenizer):
    model: WorldModel = fitted[0]
    first_turns = [t.turns[0] for t in fitted[1]]
    familiar = model.disagreement(
        model.initial_state([u.observation for u in first_turns]),
        [u.action for u in first_turns],
        [u.next_observation for u in first_turns],
    )
    rng = random.Random(0)
    words = sorted(w for w in hn_tokenizer.tokenizer.get_vocab() if not w.startswith("<") and w != "\n")

    def scrambled(n: int) -> list[str]:
        return [" ".join(rng.choice(words) for _ in range(n)) for _ in first_turns]

    unfamiliar = model.disagreement(model.initial_state(scrambled(8)), scrambled(3), scrambled(4))
    assert unfamiliar.mean() > 2 * familiar.mean()
