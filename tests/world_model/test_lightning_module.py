"""``WorldModelModule`` / ``fit_world_model`` / ``refit_on_store`` on tiny hidden_number data.

One logged fit (40 AdamW steps) is shared; the determinism and store checks use a few steps each.
"""

import dataclasses
import math

import pytest
import torch

from envs import TrajectoryStore
from world_model.data import trainable, trajectory_loader
from world_model.lightning_module import fit_world_model, refit_on_store

from .conftest import hidden_number_trajectories, tiny_model

PARTS = ("loss", "observation_nll", "reconstruction_nll", "reward_mse", "done_bce")


@pytest.fixture(scope="module")
def data():
    return hidden_number_trajectories(seed=0, groups=12), hidden_number_trajectories(seed=100, groups=4)


@pytest.fixture(scope="module")
def fitted(hn_tokenizer, data, tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("wm_fit")
    model = tiny_model(hn_tokenizer, seed=0)
    metrics = fit_world_model(*data, model, max_steps=40, batch_size=8, lr=5e-3, seed=0, log_dir=log_dir)
    return model, metrics, log_dir


@pytest.mark.slow
def test_fit_lowers_validation_loss_and_logs(fitted):
    model, metrics, log_dir = fitted
    assert metrics["steps"] == 40
    assert not model.training
    assert metrics["val_after/loss"] < 0.5 * metrics["val_before/loss"]
    for part in ("observation_nll", "reconstruction_nll", "done_bce"):
        assert metrics[f"val_after/{part}"] < metrics[f"val_before/{part}"], part
    for part in PARTS:
        for key in (f"wm/{part}", f"wm/val_{part}", f"train_after/{part}"):
            assert math.isfinite(metrics[key]), key
    assert (log_dir / "checkpoints" / "last.ckpt").is_file()
    assert list((log_dir / "tensorboard" / "version_0").glob("events.out.tfevents.*"))


def test_same_seed_same_weights_and_global_rng_untouched(hn_tokenizer, data):
    train, val = data

    def run(seed: int) -> dict[str, torch.Tensor]:
        model = tiny_model(hn_tokenizer, seed=0)
        fit_world_model(train, val, model, max_steps=3, batch_size=8, seed=seed)
        return model.state_dict()

    torch.manual_seed(123)
    expected_draw = torch.rand(3)
    torch.manual_seed(123)
    a = run(0)
    assert torch.equal(torch.rand(3), expected_draw)
    b, c = run(0), run(1)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_loader_is_seeded_and_skips_untrainable(hn_tokenizer, data):
    train, _ = data
    empty = dataclasses.replace(train[0], turns=[], trajectory_id=999)
    items = [*train, empty]
    assert len(trainable(items)) == len(train)

    def order(seed: int) -> list[list[float]]:
        loader = trajectory_loader(items, hn_tokenizer, batch_size=5, shuffle=True, seed=seed)
        return [batch.rewards.sum(-1).tolist() for batch in loader]

    assert order(0) == order(0)
    assert order(0) != order(1)
    with pytest.raises(ValueError, match="played turn"):
        trajectory_loader([empty], hn_tokenizer, batch_size=2)


def test_refit_on_store_writes_nothing(hn_tokenizer, data, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = TrajectoryStore(tmp_path / "store")
    store.append(data[0])
    model = tiny_model(hn_tokenizer, seed=0)
    metrics = refit_on_store(model, store, steps=3, batch_size=8, last=10)
    assert metrics["steps"] == 3 and metrics["trajectories"] == 10
    assert math.isfinite(metrics["wm/loss"]) and "train_after/loss" not in metrics  # no extra pass over the data
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]
