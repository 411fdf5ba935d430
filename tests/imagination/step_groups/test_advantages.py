"""Counterfactual step-group arithmetic against hand-worked values and properties."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from imagination.step_groups.advantages import (
    counterfactual_step_advantages,
    imagined_values,
    select_step_advantages,
    total_advantages,
)


def test_imagined_values_discount_rewards_and_bootstrap_only_cut_off_members():
    rewards = torch.tensor([[0.0, 1.0], [0.5, 0.0], [0.2, -0.1]])  # (M, H); member 1 played one turn
    lengths = torch.tensor([2, 1, 2])
    bootstrap = torch.tensor([0.3, 0.8, 0.4])
    cut_off = torch.tensor([False, True, True])  # member 0 ended done: its 0.3 is never read
    got = imagined_values(rewards, lengths, bootstrap, cut_off, gamma=0.9)
    # 0 + 0.9 * 1;  0.5 + 0.9 * 0.8;  0.2 + 0.9 * (-0.1) + 0.81 * 0.4
    assert got.tolist() == pytest.approx([0.9, 1.22, 0.434])


def test_imagined_values_refuse_lengths_outside_the_horizon():
    with pytest.raises(ValueError, match="lengths"):
        imagined_values(
            torch.zeros(1, 2), torch.tensor([3]), torch.zeros(1), torch.zeros(1, dtype=torch.bool), gamma=0.9
        )


def test_real_action_advantage_by_hand():
    values = torch.tensor([[1.0, 0.0, 0.0, 2.0]])  # real action first, three siblings
    # mean 0.75; deviations .25 -.75 -.75 1.25; sample variance 2.75 / 3
    std = math.sqrt(2.75 / 3)
    got = counterfactual_step_advantages(values)
    assert got[0].tolist() == pytest.approx(
        [0.25 / (std + 1e-6), -0.75 / (std + 1e-6), -0.75 / (std + 1e-6), 1.25 / (std + 1e-6)]
    )
    assert counterfactual_step_advantages(values, mode="mean_norm")[0, 0].item() == pytest.approx(0.25)


def test_zero_when_every_sibling_has_the_real_actions_value_and_for_a_group_of_one():
    values = torch.tensor([[0.7, 0.7, 0.7], [0.1, 0.1, 0.3]])
    got = counterfactual_step_advantages(values)
    assert got[0].tolist() == [0.0, 0.0, 0.0]
    assert got[1, 0].item() < 0 and got[1, 2].item() > 0
    assert counterfactual_step_advantages(torch.tensor([[5.0]])).tolist() == [[0.0]]  # G = 0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.floats(-5, 5, allow_nan=False), min_size=3, max_size=3), min_size=1, max_size=6),
    st.floats(-10, 10, allow_nan=False),
)
def test_groups_are_independent_centred_and_shift_invariant(rows, shift):
    values = torch.tensor(rows, dtype=torch.float64)  # (R, 3)
    got = counterfactual_step_advantages(values, mode="mean_norm")
    assert torch.allclose(got.sum(dim=1), torch.zeros(len(rows), dtype=torch.float64), atol=1e-9)
    assert torch.allclose(counterfactual_step_advantages(values + shift, mode="mean_norm"), got, atol=1e-7)
    for r in range(len(rows)):  # brute force, one group at a time
        alone = counterfactual_step_advantages(values[r : r + 1])
        assert torch.allclose(counterfactual_step_advantages(values)[r], alone[0])


def test_fallback_selection():
    counterfactual = torch.tensor([1.0, 2.0, 3.0, 4.0])
    exact = torch.tensor([-1.0, -2.0, -3.0, -4.0])
    uncertainty = torch.tensor([0.2, 0.7, float("nan"), 0.5])
    step, fell_back = select_step_advantages(counterfactual, exact, uncertainty, threshold=None)
    assert step.tolist() == [1.0, 2.0, 3.0, 4.0] and not fell_back.any()
    step, fell_back = select_step_advantages(counterfactual, exact, uncertainty, threshold=0.5)
    assert step.tolist() == [1.0, -2.0, -3.0, 4.0]  # above the threshold, and NaN, fall back; 0.5 is kept
    assert fell_back.tolist() == [False, True, True, False]
    available = torch.tensor([False, True, True, True])
    step, fell_back = select_step_advantages(
        counterfactual, exact, uncertainty, threshold=None, available=available
    )
    assert step.tolist() == [-1.0, 2.0, 3.0, 4.0] and fell_back.tolist() == [True, False, False, False]


def test_total_is_episode_plus_omega_step():
    assert total_advantages(torch.tensor([1.0, -1.0]), torch.tensor([0.5, 2.0]), omega=0.5).tolist() == [
        1.25,
        0.0,
    ]
