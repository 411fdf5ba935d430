"""The plain refit loop: its step schedule on a hand-worked case, and the Lightning fit's weights bit for bit."""

import pytest
import torch

from envs import TrajectoryStore
from imagination.config import ImaginationConfig
from world_model.data import trainable
from world_model.lightning_module import fit_world_model, refit_on_store
from world_model.plain_fit import fit_plain, plain_steps, refit_plain_on_store

from .conftest import hidden_number_trajectories, tiny_model


def test_plain_steps_goes_round_the_batches_and_stops_at_max_steps():
    # w = 0, loss (w - b)^2, SGD lr 0.1, batches 1 then 3, three steps (the third starts a second pass):
    #   b=1: grad 2(0 - 1) = -2     -> w = 0.2
    #   b=3: grad 2(0.2 - 3) = -5.6 -> w = 0.76
    #   b=1: loss (0.76 - 1)^2 = 0.0576, grad -0.48 -> w = 0.808
    w = torch.zeros((), dtype=torch.float64, requires_grad=True)
    batches = [torch.tensor(1.0, dtype=torch.float64), torch.tensor(3.0, dtype=torch.float64)]
    loss, steps, epochs = plain_steps(batches, lambda b: (w - b) ** 2, torch.optim.SGD([w], lr=0.1), max_steps=3)
    assert (steps, epochs) == (3, 2)
    assert loss == pytest.approx(0.0576, abs=1e-12)
    assert float(w) == pytest.approx(0.808, abs=1e-12)


def test_plain_steps_refuses_an_empty_pass():
    w = torch.zeros((), requires_grad=True)
    with pytest.raises(ValueError, match="no batch"):
        plain_steps([], lambda b: w * b, torch.optim.SGD([w], lr=0.1), max_steps=1)


# (trajectories, batch size, steps): one step; a partial last batch, into a third pass; a full last
# batch, into a second pass (the pass that a sampler asked once too often would shuffle differently).
@pytest.mark.parametrize(("count", "batch_size", "steps"), [(16, 8, 1), (13, 8, 5), (16, 8, 3)])
def test_fit_plain_leaves_the_lightning_fits_weights(hn_tokenizer, count, batch_size, steps):
    data = trainable(hidden_number_trajectories(seed=0, groups=8))[:count]
    assert len(data) == count
    lightning, plain = tiny_model(hn_tokenizer, seed=0), tiny_model(hn_tokenizer, seed=0)
    reference = fit_world_model(data, [], lightning, max_steps=steps, batch_size=batch_size, lr=5e-3, seed=4,
                                score_train=False)
    got = fit_plain(data, [], plain, max_steps=steps, batch_size=batch_size, lr=5e-3, seed=4)
    assert got["steps"] == steps and not plain.training
    assert got["wm/loss"] == reference["wm/loss"]
    expected = lightning.state_dict()
    assert all(torch.equal(tensor, expected[name]) for name, tensor in plain.state_dict().items())


def test_refit_plain_on_store_counts_its_trajectories(hn_tokenizer, tmp_path):
    store = TrajectoryStore(tmp_path / "store")
    store.append(hidden_number_trajectories(seed=1, groups=2))
    lightning, plain = tiny_model(hn_tokenizer, seed=1), tiny_model(hn_tokenizer, seed=1)
    reference = refit_on_store(lightning, store, steps=2, batch_size=4, seed=0, last=3)
    got = refit_plain_on_store(plain, store, steps=2, batch_size=4, seed=0, last=3)
    assert got["trajectories"] == reference["trajectories"] == 3  # the newest 3 of the store
    assert got["wm/loss"] == reference["wm/loss"]


def test_fit_plain_refuses_validation_data(hn_tokenizer):
    data = hidden_number_trajectories(seed=0, groups=1)
    with pytest.raises(ValueError, match="no validation"):
        fit_plain(data, data, tiny_model(hn_tokenizer), max_steps=1)


def test_an_unknown_fit_loop_names_the_key():
    with pytest.raises(ValueError, match="imagination.fit_loop"):
        ImaginationConfig(fit_loop="fast")


def test_fit_plain_decays_weights_as_lightning_does(hn_tokenizer):
    data = trainable(hidden_number_trajectories(seed=0, groups=8))[:8]
    lightning, plain, undecayed = (tiny_model(hn_tokenizer, seed=0) for _ in range(3))
    fit_world_model(data, [], lightning, max_steps=2, batch_size=4, lr=5e-3, weight_decay=0.5, seed=4,
                    score_train=False)
    fit_plain(data, [], plain, max_steps=2, batch_size=4, lr=5e-3, weight_decay=0.5, seed=4)
    fit_plain(data, [], undecayed, max_steps=2, batch_size=4, lr=5e-3, seed=4)
    expected, other = lightning.state_dict(), undecayed.state_dict()
    assert all(torch.equal(tensor, expected[name]) for name, tensor in plain.state_dict().items())
    assert not all(torch.equal(tensor, other[name]) for name, tensor in plain.state_dict().items())
