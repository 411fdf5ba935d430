"""The per-iteration glue: column 0 of each group is its real row's step term, siblings become rows,
and the fallback gives GiGPO back exactly."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import envs
import imagination.step_groups.counterfactual_gigpo as glue
from critic.config import LatentCriticSection
from imagination.config import ImaginationConfig
from imagination.step_groups.advantages import counterfactual_step_advantages
from imagination.step_groups.groups import CounterfactualGroups
from policy.advantages import gigpo_advantages
from policy.advantages.algorithms import turn_rows
from policy.advantages.config import AlgoConfig, CounterfactualConfig
from policy.config import PolicyConfig
from policy.lm_policy import LMPolicy
from policy.model import build_tiny_lm, build_tiny_tokenizer
from policy.rollout_batch import build_rollout_batch
from tests.imagination.conftest import tiny_model

CRITIC = LatentCriticSection(latent_size=8, head_hidden_size=8, embed_size=8, feature_size=8, conv_layers=0)
KWARGS = {"n": 4, "max_turns": 2}


@pytest.fixture(scope="module")
def policy_and_batch():
    env = envs.make("hidden_number", **KWARGS)
    cfg = PolicyConfig(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32, history_window=0)
    tokenizer = build_tiny_tokenizer(env.vocabulary())
    policy = LMPolicy(build_tiny_lm(cfg, tokenizer, seed=0), tokenizer, cfg, seed=0)
    episodes = envs.collect(
        policy, "hidden_number", env_kwargs=KWARGS, group_size=2, n_groups=2, seed=1, progress=False
    )
    return policy, build_rollout_batch(episodes, pad_id=policy.pad_token_id)


def fake_groups(values_of_row):
    """Replace the imagination with groups whose values are ``values_of_row(r)`` and whose members
    are copies of the real trajectory branched at the row's turn (so siblings carry its sample)."""

    def imagine(policy, world_model, critic, env_name, env_kwargs, states, *, siblings, **_):
        members = [
            [dataclasses.replace(t, source="imagined", branch_turn=k) for _ in range(siblings + 1)]
            for t, k in states
        ]
        values = torch.tensor([values_of_row(r) for r in range(len(states))], dtype=torch.float32)
        return CounterfactualGroups(list(states), members, values, halted=0)

    return imagine


def estimator(options: CounterfactualConfig, **imagination) -> glue.CounterfactualGiGPO:
    algo = AlgoConfig(name="counterfactual_gigpo", omega=0.5, counterfactual=options)
    return glue.CounterfactualGiGPO(
        algo,
        ImaginationConfig(**imagination),
        tiny_model("hidden_number"),
        "hidden_number",
        KWARGS,
        critic_options=CRITIC,
        seed=0,
    )


def gigpo_of(batch, algo):
    rows = turn_rows(batch.trajectories, batch.row_keys, invalid_action_penalty=algo.invalid_action_penalty)
    return gigpo_advantages(
        rows.step_rows(),
        gamma=algo.gamma,
        omega=algo.omega,
    )


def test_each_real_row_gets_its_own_groups_real_action_advantage(monkeypatch, policy_and_batch):
    policy, batch = policy_and_batch
    values = lambda r: [float(r % 3), 0.0, 1.0, 2.0]  # noqa: E731 (the real action's value varies by row)
    monkeypatch.setattr(glue, "imagine_counterfactual_groups", fake_groups(values))
    est = estimator(CounterfactualConfig(siblings=3, critic_fit_steps=1))
    out_batch, advantages, metrics = est.advantages(policy, batch, iteration=1)
    assert out_batch is batch
    per_row = advantages.sum(dim=1) / batch.tokens.response_mask.sum(dim=1)  # (B,) the broadcast scalar
    step = counterfactual_step_advantages(torch.tensor([values(r) for r in range(len(batch))]))[:, 0]
    want = gigpo_of(batch, est.algo).episode_advantages + 0.5 * step
    assert torch.allclose(per_row, want, atol=1e-5)
    assert metrics["counterfactual/groups"] == len(batch) and metrics["counterfactual/fallback_share"] == 0.0


def test_siblings_enter_the_gradient_with_their_own_advantage_and_weight(monkeypatch, policy_and_batch):
    policy, batch = policy_and_batch
    monkeypatch.setattr(glue, "imagine_counterfactual_groups", fake_groups(lambda r: [1.0, 0.0, 3.0]))
    est = estimator(
        CounterfactualConfig(siblings=2, siblings_in_gradient=True, critic_fit_steps=0), imagined_weight=0.25
    )
    out_batch, advantages, metrics = est.advantages(policy, batch, iteration=1)
    n = len(batch)
    assert len(out_batch) == 3 * n and metrics["counterfactual/sibling_rows"] == 2 * n
    assert out_batch.weights[:n].tolist() == [1.0] * n and out_batch.weights[n:].tolist() == [0.25] * (2 * n)
    per_row = advantages.sum(dim=1) / out_batch.tokens.response_mask.sum(dim=1)
    member = counterfactual_step_advantages(torch.tensor([[1.0, 0.0, 3.0]]))[0]  # (3,)
    assert torch.allclose(per_row[n:], 0.5 * member[1:].repeat(n), atol=1e-5)  # siblings 1, 2 of each row
    for i, t in out_batch.row_keys[n:]:
        assert out_batch.trajectories[i].branch_turn == t and out_batch.trajectories[i].num_turns == t + 1


def test_above_the_uncertainty_threshold_every_row_is_gigpo(monkeypatch, policy_and_batch):
    policy, batch = policy_and_batch
    monkeypatch.setattr(glue, "imagine_counterfactual_groups", fake_groups(lambda r: [5.0, 0.0, 1.0]))
    est = estimator(
        CounterfactualConfig(
            siblings=2, siblings_in_gradient=True, fallback_uncertainty=0.0, critic_fit_steps=0
        )
    )
    out_batch, advantages, metrics = est.advantages(
        policy, batch, iteration=1
    )  # an untrained model is unsure
    per_row = advantages.sum(dim=1) / out_batch.tokens.response_mask.sum(dim=1)
    assert len(out_batch) == len(batch) and metrics["counterfactual/fallback_share"] == 1.0
    assert torch.allclose(per_row, gigpo_of(batch, est.algo).advantages, atol=1e-6)
    closed = est.advantages(policy, batch, iteration=2, gate_open=False)[1]  # a closed gate: GiGPO too
    assert torch.allclose(closed.sum(dim=1) / batch.tokens.response_mask.sum(dim=1), per_row, atol=1e-6)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("siblings", 0),
        ("horizon", 0),
        ("fallback_uncertainty", -1.0),
        ("critic_lr", 0.0),
        ("siblings_in_gradient", 1),
    ],
)
def test_bad_options_name_their_key(key, value):
    with pytest.raises(ValueError, match=f"algo.counterfactual.{key}"):
        CounterfactualConfig(**{key: value})
