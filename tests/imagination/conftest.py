"""Tiny world models for dream-env tests, and a wrapper that fixes what a model's step predicts."""

from __future__ import annotations

import dataclasses
import functools

import pytest
import torch

from envs.registry import make
from world_model import TokenLimits, TurnTokenizer, WorldModel, WorldModelConfig

TINY = {
    "latent_size": 16,
    "num_members": 2,
    "encoder": {"embed_size": 16, "feature_size": 16, "conv_layers": 1},
    "decoder": {"model_size": 16, "num_layers": 1, "num_heads": 2, "latent_slots": 2},
    "head_hidden": 16,
}


@functools.cache
def tokenizer_for(name: str) -> TurnTokenizer:
    """The env's tokenizer; minishop's with a short observation cap (its pages run to ~190 words,
    and an untrained model writes to the cap, a few seconds a step): the tests need no full pages."""
    if name == "minishop":
        env = make(name)
        return TurnTokenizer.build(env.vocabulary(), TokenLimits(observation=24, action=16))
    return TurnTokenizer.for_env(name)


def tiny_model(name: str, seed: int = 0) -> WorldModel:
    """An untrained tiny world model for env ``name`` (default options)."""
    tokenizer = tokenizer_for(name)
    return WorldModel(WorldModelConfig.for_tokenizer(tokenizer, **TINY), tokenizer, seed=seed).eval()


@pytest.fixture(scope="session")
def hn_model() -> WorldModel:
    return tiny_model("hidden_number")


class Steps:
    """Counts ``model.step`` calls (and their batch sizes) and overrides fields of its predictions.

    ``overrides`` maps a ``Predictions`` field (``uncertainty``, ``reward``, ``done``, ...) to a value
    for every row, or to a function ``batch size -> tensor``; the sampled text is left alone.
    """

    def __init__(self, model: WorldModel, **overrides) -> None:
        self.model = model
        self.inner = model.step
        self.overrides = overrides
        self.batch_sizes: list[int] = []

    def __call__(self, states, actions, **kwargs):
        self.batch_sizes.append(len(states))
        after, predictions = self.inner(states, actions, **kwargs)
        changes = {}
        for name, value in self.overrides.items():
            like = getattr(predictions, name)
            changes[name] = value(len(states)) if callable(value) else torch.full_like(like, value)
        return after, dataclasses.replace(predictions, **changes)

    @property
    def calls(self) -> int:
        return len(self.batch_sizes)


@pytest.fixture
def model_outcomes(monkeypatch):
    """Every ``DreamEnv`` of the test reads reward and done from the model's heads (as for an env
    without text rules), so a test can fix them through ``model.step``'s predictions."""
    monkeypatch.setattr("imagination.dream_env.outcome_rule", lambda *args, **kwargs: None)


@pytest.fixture
def patch_steps(monkeypatch):
    """``patch_steps(model, **overrides) -> Steps``, installed as ``model.step`` for one test."""

    def install(model: WorldModel, **overrides) -> Steps:
        steps = Steps(model, **overrides)
        monkeypatch.setattr(model, "step", steps)
        return steps

    return install
