"""benchmarks.world_model_precision: the modes' losses, the timed passes and the table, on a tiny model
(the compiled mode is left to the benchmark itself: a cold compile takes over a minute of CPU)."""

import copy

import pytest
import torch

from benchmarks import world_model_precision as wmp
from tests.world_model.conftest import hidden_number_trajectories, tiny_model
from world_model import TurnTokenizer
from world_model.data import trainable, trajectory_loader


@pytest.fixture(scope="module")
def model_and_batches():
    tokenizer = TurnTokenizer.for_env("hidden_number")
    trajectories = trainable(hidden_number_trajectories(0, 6))
    return tiny_model(tokenizer), lambda: trajectory_loader(trajectories, tokenizer, batch_size=4, shuffle=True, seed=0)


def test_an_unknown_mode_is_refused(model_and_batches):
    model, _ = model_and_batches
    with pytest.raises(ValueError, match="mode must be one of"):
        wmp.loss_function(model, "fp8")


def test_bf16_rounds_the_loss_but_stays_near_the_eager_one(model_and_batches):
    model, loader = model_and_batches
    batch = next(iter(loader()))
    with torch.no_grad():
        eager = float(model.loss(batch)["loss"])
        bf16 = float(wmp.loss_function(model, "bf16")(batch))
        assert float(wmp.loss_function(model, "eager")(batch)) == eager
    # bf16 keeps 8 bits of mantissa: a relative error of a few parts in a thousand per op, so the
    # autocast loss is near eager's and (deterministically, on one machine) not equal to it.
    assert bf16 == pytest.approx(eager, rel=0.05)
    assert bf16 != eager


def test_timed_passes_train_the_model_and_time_every_pass(model_and_batches):
    model, loader = model_and_batches
    fitted = copy.deepcopy(model)
    before = [p.detach().clone() for p in fitted.parameters()]
    result = wmp.timed_passes(fitted, loader(), "eager", steps=2, repeats=2, lr=1e-3)
    assert result["first_s"] > 0 and result["ms_per_step"] > 0
    assert torch.isfinite(torch.tensor(result["loss"]))
    assert any(not torch.equal(a, b) for a, b in zip(before, fitted.parameters(), strict=True))
    # Two copies from the same weights on the same batches take the same steps, so end the same.
    again = copy.deepcopy(model)
    assert wmp.timed_passes(again, loader(), "eager", steps=2, repeats=2, lr=1e-3)["loss"] == result["loss"]


def test_the_table_divides_by_eager():
    results = {"hidden_number_10": {
        "eager": {"first_s": 2.0, "ms_per_step": 50.0, "loss": 1.5},
        "bf16": {"first_s": 3.0, "ms_per_step": 75.0, "loss": 1.50004},
    }}
    lines = wmp.table(results).splitlines()
    assert lines[2] == "| hidden_number_10 | eager | 2.0 | 50 | 1.00 | 1.5000 |"
    assert lines[3] == "| hidden_number_10 | bf16 | 3.0 | 75 | 1.50 | 1.5000 |"
