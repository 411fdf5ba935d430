"""The Monte-Carlo returns that set algo=fused's critic weight: lambda forced to 1, truncations bootstrapped.

Worked by hand on one trajectory of two turns (rewards 1 and 2) cut by the turn cap, bootstrap value
4, gamma 0.5, and lambda 0.5 in the config (which the critic parent uses, and these returns must not):
    G_1 = 2 + 0.5 * 4            = 4
    G_0 = 1 + 0.5 * 2 + 0.25 * 4 = 3
With lambda 0.5 instead they would mix in the values; without the bootstrap they would be 2 and 2.
"""

from __future__ import annotations

import pytest
import torch

import policy.advantages.algorithms as algorithms
from policy.advantages.config import AlgoConfig, FusedConfig


def test_the_fused_weights_see_lambda_one_returns_bootstrapped_at_the_cut(monkeypatch):
    rows = algorithms.TurnRows([0, 1], torch.zeros(2, dtype=torch.long), torch.tensor([7, 7]), torch.tensor([0, 1]),
                    ["a0", "a1"], torch.tensor([1.0, 2.0]), torch.tensor([3.0, 3.0]))
    seen = {}

    def capture(cfg, **kwargs):
        seen.update(kwargs)
        return torch.full((2,), 0.5)

    monkeypatch.setattr(algorithms, "fused_critic_weights", capture)
    cfg = AlgoConfig(name="fused", gamma=0.5, lam=0.5, whiten_advantages=False, fused=FusedConfig())
    values = torch.tensor([10.0, -10.0])  # far from the returns: any lambda < 1 would show them
    algorithms.fused_token_advantages(cfg, rows, torch.ones(2, 1), values, bootstrap=torch.tensor([0.0, 4.0]))
    assert seen["mc_returns"].tolist() == pytest.approx([3.0, 4.0])


def test_leave_one_out_means_keep_double_precision():
    # Scores 0.1 and 0.2 in one group (float64 in): each row's baseline is the other's score, 0.2 and 0.1
    # to double precision (a sum minus a score: within 1e-15). In float32 0.2 is 0.20000000298...
    from policy.advantages.fused import leave_one_out_group_means

    means = leave_one_out_group_means(torch.tensor([0.1, 0.2], dtype=torch.float64), [0, 0], [1, 2])
    assert means.dtype == torch.float64 and means.tolist() == pytest.approx([0.2, 0.1], abs=1e-12, rel=0)
