"""Edges of the advantage estimators worked by hand: documented defaults, stat rows that leave a group
out or hold one row, integer inputs, empty batches, a right-padded token row, rows out of step order."""

from __future__ import annotations

import math

import pytest
import torch

from policy.advantages import gigpo_advantages, hgpo_advantages
from policy.advantages.algorithms import TurnRows, critic_token_advantages, group_baseline_token_advantages
from policy.advantages.config import AlgoConfig
from policy.advantages.group_norm import group_index, normalise_in_groups
from policy.advantages.grpo import score_from_token_rewards
from policy.advantages.sppo import sppo_advantages
from policy.advantages.step_rows import StepRows, discounted_step_returns, episode_advantages
from policy.advantages.tokens import broadcast_to_tokens


def one_trajectory(rewards, episode=1.0) -> StepRows:
    n = len(rewards)
    return StepRows([0] * n, [7] * n, list(range(n)), [f"s{i}" for i in range(n)], torch.tensor(rewards),
                    torch.full((n,), episode))


def test_default_discount_and_history_levels():
    # Rewards 0, 0, 1: default gamma 0.95 gives step returns 0.9025, 0.95, 1.
    want = [0.95**2, 0.95, 1.0]
    assert hgpo_advantages(one_trajectory([0.0, 0.0, 1.0])).step_returns.tolist() == pytest.approx(want)
    assert gigpo_advantages(one_trajectory([0.0, 0.0, 1.0])).step_returns.tolist() == pytest.approx(want)
    # K = 2 by default: levels 1, 2, 3 (one column each).
    result = hgpo_advantages(one_trajectory([0.0, 0.0, 1.0]))
    assert result.levels == (1, 2, 3) and result.level_advantages.shape == (3, 3)


def test_default_eps_is_a_millionth():
    # Values 0 and 2 in one group: mean 1, sample std sqrt(2), so +-1 / (sqrt(2) + 1e-6).
    out = normalise_in_groups(torch.tensor([0.0, 2.0], dtype=torch.float64), [0, 0])
    assert out.tolist() == pytest.approx([-1 / (math.sqrt(2) + 1e-6), 1 / (math.sqrt(2) + 1e-6)], rel=1e-12)


def test_a_group_without_stat_rows_is_refused():
    with pytest.raises(ValueError, match="every group needs at least one row in stat_rows"):
        normalise_in_groups(torch.tensor([0.0, 1.0, 2.0]), [0, 0, 1], stat_rows=torch.tensor([True, True, False]))


def test_all_equal_stat_rows_zero_every_row_of_their_group():
    # Stat rows 1 and 1 (equal): all three rows get exactly 0, the non-stat row 5 too.
    out = normalise_in_groups(torch.tensor([1.0, 1.0, 5.0]), [0, 0, 0], stat_rows=torch.tensor([True, True, False]))
    assert out.tolist() == [0.0, 0.0, 0.0]


def test_singleton_zero_also_zeroes_a_groups_non_stat_rows():
    # One stat row (1) and a non-stat row (5): a group of one, so both get 0 (not 4 / eps).
    out = normalise_in_groups(torch.tensor([1.0, 5.0]), [0, 0], singleton="zero", stat_rows=torch.tensor([True, False]))
    assert out.tolist() == [0.0, 0.0]


def test_integer_values_come_back_as_floats():
    out = normalise_in_groups(torch.tensor([0, 3]), [0, 0], mode="mean_norm")
    assert out.dtype == torch.get_default_dtype() and out.tolist() == [-1.5, 1.5]


def test_an_empty_batch_has_no_step_returns():
    assert discounted_step_returns(torch.zeros(0), {}, 0.9).shape == (0,)


def test_episode_and_step_terms_use_the_given_eps():
    # Two trajectories of one group, scores 0 and 2 (one row each): sample std sqrt(2), eps 0.5.
    rows = {0: [0], 1: [1]}
    got = episode_advantages([0, 0], rows, torch.tensor([0.0, 2.0]), mode="mean_std_norm", eps=0.5,
                             episode_stats="rows")
    assert got.tolist() == pytest.approx([-1 / (math.sqrt(2) + 0.5), 1 / (math.sqrt(2) + 0.5)])
    # GiGPO's step term: the two rows share anchor "s" with step returns 0 and 2 -> the same numbers.
    step_rows = StepRows([0, 0], [0, 1], [0, 0], ["s", "s"], torch.tensor([0.0, 2.0]), torch.tensor([0.0, 2.0]))
    step = gigpo_advantages(step_rows, eps=0.5).step_advantages
    assert step.tolist() == pytest.approx([-1 / (math.sqrt(2) + 0.5), 1 / (math.sqrt(2) + 0.5)])


@pytest.mark.parametrize("column", ["group_ids", "traj_ids", "steps", "anchors", "episode_rewards"])
def test_a_short_column_is_named(column):
    fields = dict(group_ids=[0, 0], traj_ids=[1, 1], steps=[0, 1], anchors=["a", "b"],
                  step_rewards=torch.tensor([0.0, 1.0]), episode_rewards=torch.tensor([1.0, 1.0]))
    fields[column] = fields[column][:1]
    with pytest.raises(ValueError, match=f"{column} has 1 rows, expected 2"):
        gigpo_advantages(StepRows(**fields))


def test_broadcast_refuses_a_column_of_the_right_length():
    mask = torch.ones(2, 4)
    with pytest.raises(ValueError, match=r"must be \(B,\)"):
        broadcast_to_tokens(torch.ones(2, 1), mask)  # (B, 1): right length, wrong rank
    with pytest.raises(ValueError, match=r"must be \(B,\)"):
        broadcast_to_tokens(torch.ones(3), mask)


def test_sppo_keeps_the_logits_dtype():
    out = sppo_advantages(torch.tensor([1.0], dtype=torch.float64), torch.tensor([0.0]))
    assert out.dtype == torch.float32 and out.tolist() == [0.5]


def turn_rows(traj_ids, steps, step_rewards, episode_rewards) -> TurnRows:
    n = len(traj_ids)
    return TurnRows(list(range(n)), torch.zeros(n, dtype=torch.long), torch.tensor(traj_ids), torch.tensor(steps),
                    [f"a{i}" for i in range(n)], torch.tensor(step_rewards), torch.tensor(episode_rewards))


def test_sppo_reads_the_value_of_the_earliest_step_whatever_the_row_order():
    # Trajectory 3's rows come step 1 first, then step 0; score 1. Logit 0 on step 0's row (V = 0.5),
    # ln 3 on step 1's (V = 0.75): every row's advantage is 1 - 0.5. Scores 1.5 and -0.5 clip to [0, 1].
    rows = turn_rows([3, 3, 4], [1, 0, 0], [0.0, 1.0, 0.0], [1.0, 1.0, -0.5])
    rows.episode_rewards[2] = -0.5
    logits = torch.tensor([math.log(3.0), 0.0, 0.0])
    adv, targets = critic_token_advantages(AlgoConfig(name="sppo"), rows, torch.ones(3, 2), logits)
    assert adv[:2].flatten().tolist() == pytest.approx([0.5] * 4)
    assert targets.tolist() == [1.0, 1.0, 0.0]
    high = turn_rows([5], [0], [0.0], [1.5])
    assert critic_token_advantages(AlgoConfig(name="sppo"), high, torch.ones(1, 1), torch.zeros(1))[1].tolist() == [1.0]


def test_token_rewards_sit_on_each_rows_last_action_token():
    # Two one-turn trajectories, rewards 1 and 2, action tokens in columns 0-1 and 0-2 (right padding),
    # values 0, gamma = lam = 1: every action token's advantage is its row's reward, padding 0.
    rows = turn_rows([0, 1], [0, 0], [1.0, 2.0], [1.0, 2.0])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    cfg = AlgoConfig(name="ppo_token", gamma=1.0, lam=1.0, whiten_advantages=False)
    adv, returns = critic_token_advantages(cfg, rows, mask, torch.zeros(2, 3))
    assert adv.tolist() == [[1.0, 1.0, 0.0], [2.0, 2.0, 2.0]]


def test_refusals_name_the_key_and_the_shapes():
    with pytest.raises(ValueError, match=r"token_rewards \(2, 3\) and mask \(2, 2\) differ"):
        score_from_token_rewards(torch.zeros(2, 3), torch.zeros(2, 2))
    with pytest.raises(ValueError, match=r"group keys must be 1-D, got shape \(2, 2\)"):
        group_index(torch.zeros(2, 2))
    with pytest.raises(ValueError, match=r"values must be 1-D \(N,\), got shape \(2, 1\)"):
        normalise_in_groups(torch.zeros(2, 1), [0, 0])
    with pytest.raises(ValueError, match="3 keys for 2 values"):
        normalise_in_groups(torch.zeros(2), [0, 0, 1])
    rows = one_trajectory([0.0, 1.0])
    with pytest.raises(ValueError, match="mode='bogus' is not valid"):
        hgpo_advantages(rows, mode="bogus")
    with pytest.raises(ValueError, match="mode='bogus' is not valid"):
        gigpo_advantages(rows, mode="bogus")
    with pytest.raises(ValueError, match="K=-1 must be >= 0"):
        hgpo_advantages(rows, K=-1)


def test_hgpo_levels_and_fractional_weights_by_hand_in_float64():
    # One group, trajectories A (anchors s, t), B (s, t), C (u, t); only A's second step pays 1, gamma 1,
    # so step returns are A 1, 1; B 0, 0; C 0, 0. A's step at t: level 1 (anchor t) holds 1, 0, 0
    # (mean 1/3, population std sqrt(2)/3); level 2 (s, t) holds 1, 0 (mean 1/2, std 1/2).
    # alpha 1/2: weights sqrt(2) and sqrt(3), in float64 as the rows are.
    rows = StepRows([0] * 6, ["A", "A", "B", "B", "C", "C"], [0, 1] * 3, ["s", "t", "s", "t", "u", "t"],
                    torch.tensor([0.0, 1.0, 0, 0, 0, 0], dtype=torch.float64),
                    torch.tensor([1.0, 1.0, 0, 0, 0, 0], dtype=torch.float64))
    result = hgpo_advantages(rows, gamma=1.0, alpha=0.5)
    eps = 1e-6
    a1, a2 = (2 / 3) / (math.sqrt(2) / 3 + eps), 0.5 / (0.5 + eps)
    w1, w2 = math.sqrt(2), math.sqrt(3)
    assert result.level_advantages[1].tolist() == pytest.approx([a1, a2, 0.0], rel=1e-12)
    assert float(result.advantages[1]) == pytest.approx((w1 * a1 + w2 * a2) / (w1 + w2 + eps), rel=1e-12)
    # A's first step: level 1 (anchor s) holds 1, 0 -> a2's value; no level 2 yet.
    assert float(result.advantages[0]) == pytest.approx(w1 * a2 / (w1 + eps), rel=1e-12)


def test_critic_values_of_the_wrong_shape_are_named():
    rows = turn_rows([0, 1], [0, 0], [1.0, 2.0], [1.0, 2.0])
    with pytest.raises(ValueError, match=r"ppo_turn needs values of shape \(2,\), got \(2, 3\)"):
        critic_token_advantages(AlgoConfig(name="ppo_turn"), rows, torch.ones(2, 3), torch.zeros(2, 3))


def test_algo_hgpo_reads_its_history_levels():
    # The trajectories of the float64 HGPO case above as TurnRows, algo.history_levels = 0: level 1 alone,
    # so A's step at t gets 2 * a1 / (2 + 1e-6) with a1 = (2/3) / (sqrt(2)/3 + 1e-6) (alpha 1: weight 2).
    rows = TurnRows(list(range(6)), torch.zeros(6, dtype=torch.long), torch.tensor([0, 0, 1, 1, 2, 2]),
                    torch.tensor([0, 1] * 3), ["s", "t", "s", "t", "u", "t"],
                    torch.tensor([0.0, 1.0, 0, 0, 0, 0]), torch.tensor([1.0, 1.0, 0, 0, 0, 0]))
    cfg = AlgoConfig(name="hgpo", gamma=1.0, history_levels=0, alpha=1.0)
    adv = group_baseline_token_advantages(cfg, rows, torch.ones(6, 1))  # (B, 1)
    a1 = (2 / 3) / (math.sqrt(2) / 3 + 1e-6)
    assert float(adv[1, 0]) == pytest.approx(2 * a1 / (2 + 1e-6), rel=1e-6)
