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


@pytest.fixture(scope="module")
def fitted_model() -> LMWorldModel:
    return fitted_lm_world_model()


def fitted_lm_world_model() -> LMWorldModel:
    """A tiny two-member model fitted for a few steps on hidden_number turns, malformed actions among
    them: its greedy text ends (``</s>``) after a few words, at lengths that differ by row (a guess's
    answer is short, an invalid action's long), so sampling drops finished rows from the cache."""
    import torch

    from envs import RandomAgent
    from envs.registry import make
    from world_model.lm.fit import training_rows

    model = tiny_lm_world_model(members=2).train()
    rows = training_rows(model, collect(RandomAgent(0), ENV, group_size=2, group_seeds=[3], progress=False))
    env = make(ENV)
    first = env.reset(5)
    invalid = env.step("oops").observation
    junk = ["oops", "help", "guess", "k", "stop", "guess(", "a b", "?"]
    prompts = model.codec.prompts([first] * 8, [()] * 8, junk)
    prompts, targets = rows.prompts + prompts, rows.targets + model.codec.targets([invalid] * 8)
    rewards, dones = torch.cat([rows.rewards, torch.zeros(8)]), torch.cat([rows.dones.float(), torch.zeros(8)])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    with torch.random.fork_rng(devices=[]), torch.enable_grad():  # (a no_grad test may ask for it)
        torch.manual_seed(0)
        for _ in range(25):
            loss = model.loss_on_rows(prompts, targets, rewards, dones)["loss"]
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return model.eval()
