"""Tiny LM world models and deterministic hidden_number episodes for the LM world-model tests."""

from __future__ import annotations

import pytest

from envs import ExpertAgent, collect
from world_model.lm import LMOptions, LMWorldModel, LMWorldModelConfig
from world_model.turn_tokens import TurnTokenizer

ENV = "hidden_number"


def tiny_lm_world_model(members: int = 2, *, seed: int = 0, history_turns: int = 2, disagreement: str = "sum",
                        **options) -> LMWorldModel:
    tk = TurnTokenizer.for_env(ENV, {})
    opts = LMOptions(history_turns=history_turns, hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2,
                     **options)
    config = LMWorldModelConfig(opts, tk.limits.observation, tk.limits.action, len(tk), num_members=members,
                                head_hidden=16, disagreement=disagreement)
    return LMWorldModel(config, tk, seed=seed).eval()


@pytest.fixture(scope="module")
def expert_episodes():
    """Expert episodes of hidden_number: the outcome of each guess is a function of the history."""
    return collect(ExpertAgent(), ENV, group_size=1, group_seeds=list(range(48)), progress=False)
