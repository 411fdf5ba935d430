"""A world model that blows up closes the imagination gate, logged, and reopens it once it recovers.

A tiny model is fitted briefly on expert hidden_number episodes, so it predicts some fresh real
turns exactly (its score, s > 0). The gate threshold is s / 2. Then every weight is multiplied by
1e6 (the model blows up: its predictions become garbage), then the weights are put back.
"""

from __future__ import annotations

import math

import pytest
import torch

from envs import ExpertAgent, TrajectoryStore, collect
from imagination.config import ImaginationConfig
from imagination.gate import ImaginationGate
from imagination.refit import refit_and_gate
from tests.imagination.test_fitted_dreams import SIZES
from world_model import TurnTokenizer, WorldModel, WorldModelConfig
from world_model.lightning_module import fit_world_model
from world_model.metrics import one_step_accuracy

pytestmark = pytest.mark.slow  # its fixture fits a world model (tens of seconds)


@pytest.fixture(scope="module")
def fitted_and_fresh():
    tokenizer = TurnTokenizer.for_env("hidden_number")
    model = WorldModel(WorldModelConfig.for_tokenizer(tokenizer, **SIZES), tokenizer, seed=0)
    train = collect(ExpertAgent(), "hidden_number", group_size=1, n_groups=50, seed=0, progress=False)
    fit_world_model(train, [], model, max_steps=60, batch_size=16, lr=5e-3, seed=0)
    fresh = collect(ExpertAgent(), "hidden_number", group_size=1, n_groups=8, seed=1, progress=False)
    return model, fresh


def test_a_blown_up_world_model_closes_the_gate_until_it_recovers(fitted_and_fresh, tmp_path) -> None:
    model, fresh = fitted_and_fresh
    healthy = one_step_accuracy(model, fresh).exact_match
    assert healthy > 0.1  # the short fit predicts some turns exactly
    config = ImaginationConfig(gate_threshold=round(healthy / 2, 3), fit_every=1000)  # no refit in this test
    gate, lines = ImaginationGate(config.gate_threshold), []
    store = TrajectoryStore(tmp_path / "store")

    def step(iteration: int) -> dict[str, float]:
        return refit_and_gate(
            model, gate, store, fresh, config, iteration, first_fit=False, fit_seed=0, log=lines.append
        )

    step(1)
    assert gate.is_open and lines == [
        f"gate opened at iteration 1: one-step exact match {healthy:.3f} (threshold {config.gate_threshold})"
    ]
    saved = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(1e6)
    blown = step(2)
    assert blown["wm/one_step_exact_match"] < config.gate_threshold and math.isfinite(
        blown["wm/one_step_exact_match"]
    )
    assert not gate.is_open and lines[-1].startswith("gate closed at iteration 2: one-step exact match")
    step(3)
    assert not gate.is_open and len(lines) == 2  # still blown up: closed, nothing new to log
    model.load_state_dict(saved)
    step(4)
    assert gate.is_open and lines[-1].startswith("gate opened at iteration 4") and len(lines) == 3
