"""Where a run's world model is built: on the trainer's device, unless ``world_model.lm.device`` pins one.

The meta device stands in for an accelerator: moving a module there needs no GPU, and every
parameter says where it went.
"""

from __future__ import annotations

import pytest

from envs import make
from experiments.world_model_builder import build_world_model
from world_model.config import WorldModelOptions
from world_model.lm.config import LMOptions

SMALL = {"num_members": 2}


def built(options: WorldModelOptions, device: str):
    return build_world_model(options, "hidden_number", {}, make("hidden_number").vocabulary(), seed=0, device=device)


def devices(model) -> set[str]:
    return {p.device.type for p in model.parameters()}


@pytest.mark.parametrize("name", ["latent", "lm"])
def test_the_world_model_follows_the_trainers_device(name):
    options = WorldModelOptions(name=name, **SMALL)
    assert devices(built(options, "meta")) == {"meta"}
    assert devices(built(options, "cpu")) == {"cpu"}


def test_world_model_lm_device_pins_the_lm_world_model():
    options = WorldModelOptions(name="lm", lm=LMOptions(device="cpu"), **SMALL)
    assert devices(built(options, "meta")) == {"cpu"}
