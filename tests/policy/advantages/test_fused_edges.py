"""Edges of the fused advantage by hand: each parent exact at its limit weight even when the other
parent is not finite, the rounding rule of the error variances at a large scale, and
``on_scored_rows`` when every row is scored."""

from __future__ import annotations

import math

import pytest
import torch

from policy.advantages.algorithms import TurnRows
from policy.advantages.config import FusedConfig
from policy.advantages.cut_episodes import on_scored_rows
from policy.advantages.fused import (
    fuse,
    fused_critic_weights,
    inverse_variance_weights,
    pooled_start_variance,
)


def test_a_limit_weight_takes_its_parent_whatever_the_other_holds():
    critic = torch.tensor([[math.nan, 1.0], [2.0, 3.0]])  # (B=2, L=2): row 0's critic advantage is NaN
    group = torch.tensor([[4.0, 5.0], [math.inf, 6.0]])  # row 1's group advantage is inf
    out = fuse(critic, group, torch.tensor([0.0, 1.0]))
    assert out.tolist() == [[4.0, 5.0], [2.0, 3.0]]


def test_a_gap_within_rounding_of_large_terms_is_no_error():
    # Critic residuals 100 (mean square 1e4), noise 1e4 - 1e-8: the gap 1e-8 is below 1e-9 * 1e4 = 1e-5,
    # so it counts as 0; the group's residuals are 0. Both errors 0 -> weight 1/2 (not 0).
    noise = 1e4 - 1e-8
    weights = inverse_variance_weights(torch.tensor([100.0, -100.0], dtype=torch.float64),
                                       torch.zeros(2, dtype=torch.float64), torch.tensor([0, 0]), noise)
    assert weights.tolist() == [0.5, 0.5]


def rows(scored, n=3) -> TurnRows:
    return TurnRows(list(range(n)), torch.zeros(n, dtype=torch.long), torch.arange(n), torch.zeros(n, dtype=torch.long),
                    ["a"] * n, torch.arange(n, dtype=torch.float64), torch.zeros(n),
                    None if scored is None else torch.tensor(scored))


def test_on_scored_rows_passes_a_fully_scored_batch_through():
    def double(r, cfg):  # float64, as an estimator may return
        return r.step_rewards * 2

    for scored in (None, [True, True, True]):
        out = on_scored_rows(double, rows(scored), None)
        assert out.dtype == torch.float64 and out.tolist() == [0.0, 2.0, 4.0]
    out = on_scored_rows(double, rows([True, False, True]), None)
    assert out.tolist() == [0.0, 0.0, 4.0]


def test_pooled_start_variance_by_hand():
    # Group 0's start rows return 0 and 2 (squared deviations 1 + 1, one degree of freedom); group 1 has
    # one start row (5: no degree of freedom, adds nothing); the non-start row (9) is not read.
    returns = torch.tensor([0.0, 2.0, 5.0, 9.0])
    starts = torch.tensor([True, True, True, False])
    assert pooled_start_variance(returns, [0, 0, 1, 1], starts) == pytest.approx(2.0)
    assert pooled_start_variance(returns, [0, 1, 2, 2], starts) == 0.0  # no group has two start rows


def test_evpo_needs_explained_variance_above_the_threshold():
    # Values 0 against returns 0 and 1: explained variance 1 - 1/4 / (1/4) = 0, not above the threshold 0.
    weights = fused_critic_weights(FusedConfig(weighting="evpo", evpo_threshold=0.0),
                                   critic_returns=torch.tensor([0.0, 1.0]), values=torch.zeros(2),
                                   mc_returns=torch.zeros(2), scores=torch.zeros(2), group_ids=[0, 0], traj_ids=[0, 1],
                                   levels=torch.zeros(2, dtype=torch.long), start_rows=torch.tensor([True, True]))
    assert weights.tolist() == [0.0, 0.0]
