"""Bootstrapped LM members: while training, member k weights each row by how often its trajectory was
drawn in k's own resample of the batch, which equals member k alone trained on that resample."""

from __future__ import annotations

import torch

from envs import RandomAgent, collect
from tests.world_model.lm.conftest import ENV
from world_model.lm import LMOptions, LMWorldModel, LMWorldModelConfig
from world_model.lm.fit import LMWorldModelModule, training_rows
from world_model.turn_tokens import TurnTokenizer

SEED = 11


def lm_model(members: int, *, bootstrap: bool, seed: int = 0) -> LMWorldModel:
    tk = TurnTokenizer.for_env(ENV, {})
    options = LMOptions(history_turns=1, hidden_size=16, intermediate_size=32, num_layers=1, num_heads=2)
    config = LMWorldModelConfig(options, tk.limits.observation, tk.limits.action, len(tk), num_members=members,
                                head_hidden=8, bootstrap=bootstrap)
    return LMWorldModel(config, tk, seed=seed)


def counts_by_hand(members: int, trajectories: int) -> torch.Tensor:
    """The documented rule: each member draws ``trajectories`` indices uniformly with replacement from
    the global RNG seeded with ``SEED``; its count of index b is b's weight."""
    torch.manual_seed(SEED)
    draws = torch.randint(trajectories, (members, trajectories))  # (K, B)
    return torch.stack([torch.bincount(d, minlength=trajectories) for d in draws]).float()  # (K, B)


def member_alone(pair: LMWorldModel, k: int) -> LMWorldModel:
    alone = lm_model(1, bootstrap=False)
    alone.members.models[0].load_state_dict(pair.members.models[k].state_dict())
    alone.heads[0].load_state_dict(pair.heads[k].state_dict())
    return alone.train()


def test_each_member_trains_on_its_own_resample_of_the_batch():
    episodes = collect(RandomAgent(0), ENV, group_size=5, group_seeds=[3], progress=False)
    pair = lm_model(2, bootstrap=True).train()
    rows = training_rows(pair, episodes)
    counts = counts_by_hand(2, len(episodes))
    assert not torch.equal(counts[0], counts[1])  # the two resamples differ for this seed
    torch.manual_seed(SEED)
    weights = pair.bootstrap_weights(rows.owners, rows.trajectories)  # (K, R)
    owners = [b for b, t in enumerate(episodes) for i in range(len(t.turns)) if i >= t.branch_turn]
    assert torch.equal(weights, counts[:, owners])
    torch.manual_seed(SEED)
    parts = LMWorldModelModule(pair).train()._parts(rows)  # the training step's loss, resample drawn in it
    expected = dict.fromkeys(parts, 0.0)
    for k in range(2):
        resample = [t for t, c in zip(episodes, counts[k].long().tolist(), strict=True) for _ in range(c)]
        alone = member_alone(pair, k)
        again = training_rows(alone, resample)
        for name, value in alone.loss_on_rows(again.prompts, again.targets, again.rewards, again.dones).items():
            expected[name] += value
    for name, value in parts.items():
        assert torch.allclose(value, expected[name], rtol=1e-5, atol=1e-6), name


def test_without_bootstrap_or_in_eval_every_member_sees_the_whole_batch():
    episodes = collect(RandomAgent(0), ENV, group_size=3, group_seeds=[3], progress=False)
    on, off = lm_model(2, bootstrap=True), lm_model(2, bootstrap=False)
    rows = training_rows(on, episodes)
    assert on.eval().bootstrap_weights(rows.owners, rows.trajectories) is None  # scoring never resamples
    assert off.train().bootstrap_weights(rows.owners, rows.trajectories) is None
    state = torch.random.get_rng_state()
    plain = LMWorldModelModule(off).train()._parts(rows)
    assert torch.equal(torch.random.get_rng_state(), state)  # nothing drawn: the fit's stream is as before
    whole = off.loss_on_rows(rows.prompts, rows.targets, rows.rewards, rows.dones,
                             row_weights=torch.ones(2, len(rows)))
    for name, value in plain.items():  # weights of 1 are the plain means
        assert torch.allclose(value, whole[name], rtol=1e-6, atol=1e-7), name


def test_a_bootstrapped_fit_is_the_same_for_the_same_seed_and_leaves_the_callers_rng_alone():
    from world_model.fitting import fit_any

    episodes = collect(RandomAgent(0), ENV, group_size=4, group_seeds=[3], progress=False)
    runs = []
    for _ in range(2):
        model = lm_model(2, bootstrap=True)
        state = torch.random.get_rng_state()
        fit_any(episodes, [], model, max_steps=2, batch_size=4, seed=5, score_train=False)
        assert torch.equal(torch.random.get_rng_state(), state)
        runs.append(model.state_dict())
    assert all(torch.equal(runs[0][name], runs[1][name]) for name in runs[0])
