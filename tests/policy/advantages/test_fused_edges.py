"""Edges of the fused advantage by hand: each parent exact at its limit weight even when the other
parent is not finite, the rounding rule of the error variances at a large scale, and
``on_scored_rows`` when every row is scored."""

from __future__ import annotations

import math

import torch

from policy.advantages.algorithms import TurnRows
from policy.advantages.cut_episodes import on_scored_rows
from policy.advantages.fused import fuse, inverse_variance_weights


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
