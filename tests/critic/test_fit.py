"""critic.fit: turn states, hand-worked lambda-returns, explained variance, and a fit that generalises."""

import pytest
import torch
from torch import nn

from critic.base import CriticStates
from critic.fit import (
    explained_variance,
    fit_turn_critic,
    history_states,
    lambda_returns,
    mse,
    predict,
    turn_states,
)
from critic.latent_critic import LatentCritic, LatentCriticConfig
from envs import collect
from envs.agent import ExpertAgent, RandomAgent
from envs.trajectory import Trajectory, Turn
from world_model.turn_tokens import TurnTokenizer


def trajectory(rewards, *, truncated=False, valid=None, trajectory_id=0) -> Trajectory:
    valid = valid or [True] * len(rewards)
    turns = [
        Turn(observation=f"o{i}", action=f"a{i}", next_observation=f"o{i + 1}", reward=r,
             done=(i == len(rewards) - 1 and not truncated), valid=v, anchor_observation=f"o{i}")
        for i, (r, v) in enumerate(zip(rewards, valid, strict=True))
    ]
    return Trajectory("toy", {}, seed=0, group_id=0, trajectory_id=trajectory_id, turns=turns,
                      truncated=truncated)


def test_turn_states_in_trajectory_then_turn_order():
    a, b = trajectory([0, 1]), trajectory([0, 0, 1], trajectory_id=1)
    assert [(t.trajectory_id, k) for t, k in turn_states([a, b])] == [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)]
    ends = turn_states([a, b], include_end=True)
    assert [(t.trajectory_id, k) for t, k in ends] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (1, 3)]
    states = history_states([a, b])
    assert len(states) == 5 and states.histories == turn_states([a, b])
    with pytest.raises(ValueError, match="no turns"):
        turn_states([trajectory([])])


def test_monte_carlo_returns_by_hand():
    # Rewards 0, 0, 1 then done; gamma 0.9: G2 = 1, G1 = 0.9, G0 = 0.81.
    returns = lambda_returns([trajectory([0.0, 0.0, 1.0])], gamma=0.9, lam=1.0)
    assert torch.allclose(returns, torch.tensor([0.81, 0.9, 1.0]))


def test_lambda_returns_by_hand():
    # V = 0.5, 0.6, 0.7 (and 9.0 after the end, never read: the episode is done), gamma 0.9, lam 0.5.
    # G2 = 1 (done: bootstrap 0);
    # G1 = r1 + 0.9 * ((1 - 0.5) * V2 + 0.5 * G2) = 0.9 * (0.35 + 0.5) = 0.765;
    # G0 = 0.9 * (0.5 * V1 + 0.5 * G1) = 0.9 * (0.3 + 0.3825) = 0.61425.
    values = torch.tensor([0.5, 0.6, 0.7, 9.0])
    returns = lambda_returns([trajectory([0.0, 0.0, 1.0])], values, gamma=0.9, lam=0.5)
    assert torch.allclose(returns, torch.tensor([0.61425, 0.765, 1.0]))
    # lam 1 with values still gives the Monte-Carlo returns of a done episode.
    mc = lambda_returns([trajectory([0.0, 0.0, 1.0])], values, gamma=0.9, lam=1.0)
    assert torch.allclose(mc, torch.tensor([0.81, 0.9, 1.0]))


def test_truncated_episode_bootstraps_from_the_value_after_its_last_turn():
    # Rewards 0, 0.5, cut off; V(after the last turn) = 2: G1 = 0.5 + 0.9 * 2 = 2.3, G0 = 0.9 * 2.3.
    done = trajectory([1.0])  # a second trajectory: values are read at the right offsets
    cut = trajectory([0.0, 0.5], truncated=True, trajectory_id=1)
    values = torch.tensor([0.3, 7.0, 0.1, 0.2, 2.0])  # done: V0, V_end; cut: V0, V1, V_end
    returns = lambda_returns([done, cut], values, gamma=0.9, lam=1.0)
    assert torch.allclose(returns, torch.tensor([1.0, 2.07, 2.3]))
    with pytest.raises(ValueError, match="truncated"):
        lambda_returns([cut], gamma=0.9)
    with pytest.raises(ValueError, match="num_turns \\+ 1"):
        lambda_returns([done, cut], values[:-1], gamma=0.9)
    with pytest.raises(ValueError, match="pass values"):
        lambda_returns([done], gamma=0.9, lam=0.5)


def test_invalid_actions_are_penalised():
    returns = lambda_returns([trajectory([0.0, 1.0], valid=[False, True])], gamma=1.0, invalid_penalty=0.1)
    assert torch.allclose(returns, torch.tensor([0.9, 1.0]))


def test_explained_variance_and_mse():
    target = torch.tensor([0.0, 1.0, 2.0, 3.0])
    assert explained_variance(target, target) == pytest.approx(1.0)
    assert explained_variance(torch.full((4,), 1.5), target) == pytest.approx(0.0)
    # residual 0.5 everywhere but the last (1.0): Var[res] = 0.046875, Var[target] = 1.25.
    pred = target - torch.tensor([0.5, 0.5, 0.5, 1.0])
    assert explained_variance(pred, target) == pytest.approx(1 - 0.046875 / 1.25)
    assert explained_variance(target, torch.ones(4)) == 0.0  # constant targets: 0, not NaN
    assert mse(pred, target) == pytest.approx((3 * 0.25 + 1.0) / 4)


class BagCritic(nn.Module):
    """A toy TurnCritic: the mean of learned per-id values over each row's prompt ids."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, 1)
        nn.init.zeros_(self.embed.weight)

    def forward(self, states: CriticStates) -> torch.Tensor:
        mask = states.attention_mask.float()  # (N, P)
        return (self.embed(states.input_ids).squeeze(-1) * mask).sum(-1) / mask.sum(-1)  # (N,)


def synthetic(n: int, seed: int) -> tuple[CriticStates, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 10, (n, 4), generator=g)  # (N, 4)
    target = (ids.float() / 10).mean(-1)  # learnable from the ids
    return CriticStates(ids, torch.ones_like(ids)), target


def test_fit_lowers_held_out_mse_and_is_seeded():
    train, train_y = synthetic(256, 0)
    held, held_y = synthetic(128, 1)
    critic = BagCritic(10)
    before = mse(predict(critic, held), held_y)
    losses = fit_turn_critic(critic, train, train_y, steps=200, batch_size=32, lr=0.05, seed=3)
    after = mse(predict(critic, held), held_y)
    assert len(losses) == 200 and after < 0.1 * before
    assert explained_variance(predict(critic, held), held_y) > 0.9
    assert not critic.training

    again = BagCritic(10)
    torch.manual_seed(123)
    rng_before = torch.get_rng_state()
    assert fit_turn_critic(again, train, train_y, steps=200, batch_size=32, lr=0.05, seed=3) == losses
    assert torch.equal(torch.get_rng_state(), rng_before)  # the caller's global RNG is untouched
    with pytest.raises(ValueError, match="targets"):
        fit_turn_critic(again, train, train_y[:-1], steps=1)


def test_latent_critic_fit_on_mc_returns_beats_its_start_on_held_out_episodes():
    tokenizer = TurnTokenizer.for_env("hidden_number")
    config = LatentCriticConfig.for_tokenizer(tokenizer, latent_size=16, head_hidden_size=16, embed_size=16,
                                              feature_size=16)
    critic = LatentCritic(config, tokenizer, seed=0)

    def data(seed: int) -> list[Trajectory]:
        random = collect(RandomAgent(seed=seed), "hidden_number", group_size=1, n_groups=12, seed=seed,
                         progress=False)
        expert = collect(ExpertAgent(), "hidden_number", group_size=1, n_groups=12, seed=seed + 100,
                         first_trajectory_id=12, progress=False)
        return random + expert

    train, held = data(0), data(1)
    train_y, held_y = lambda_returns(train, gamma=0.9), lambda_returns(held, gamma=0.9)
    before = mse(predict(critic, history_states(held)), held_y)
    fit_turn_critic(critic, history_states(train), train_y, steps=60, batch_size=32, lr=3e-3, seed=0)
    assert mse(predict(critic, history_states(held)), held_y) < before
