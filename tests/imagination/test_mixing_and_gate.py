"""The ratio split, its schedule, branch sampling, the gate and the return gap, against hand counts."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envs.trajectory import Trajectory, Turn
from imagination.bias import imagined_minus_real_return, return_after, start_return_gap
from imagination.branching import branchable_turns, sample_branch_points
from imagination.config import ImaginationConfig
from imagination.gate import ImaginationGate
from imagination.mixing import budget_spent, scheduled_ratio, split_groups


def episode(rewards, *, done_last=True, source="real", trajectory_id=0) -> Trajectory:
    turns = [
        Turn(observation=f"o{i}", action=f"a{i}", next_observation=f"o{i + 1}", reward=r,
             done=done_last and i == len(rewards) - 1, valid=True, anchor_observation=f"o{i}")
        for i, r in enumerate(rewards)
    ]
    return Trajectory(env_name="hidden_number", env_kwargs={}, seed=7, group_id=0, trajectory_id=trajectory_id,
                      source=source, turns=turns)


def test_ratio_zero_is_all_real_and_leaves_credit_alone():
    assert split_groups(8, 0.0, 0.3) == (8, 0, 0.3)


def test_split_carries_fractions_by_hand():
    # 8 groups at 0.95 want 0.4 real groups per update: 0, 0, 1 (credit 1.2 -> 0.2), 0, 1 (1.0 -> 0).
    credit, reals = 0.0, []
    for _ in range(5):
        real, imagined, credit = split_groups(8, 0.95, credit)
        assert real + imagined == 8
        reals.append(real)
    assert reals == [0, 0, 1, 0, 1]
    assert credit == pytest.approx(0.0, abs=1e-9)


@given(st.integers(1, 32), st.floats(0.0, 0.99), st.integers(1, 200))
def test_long_run_share_of_imagined_groups_is_the_ratio(total, ratio, iterations):
    credit, imagined_total = 0.0, 0
    for _ in range(iterations):
        real, imagined, credit = split_groups(total, ratio, credit)
        assert 0 <= real <= total and imagined == total - real
        imagined_total += imagined
    # Real groups are floor of the accumulated want: within one group of total * iterations * (1 - ratio).
    assert abs(imagined_total - total * iterations * ratio) <= 1 + 1e-6


def test_split_rejects_bad_input():
    with pytest.raises(ValueError, match="ratio"):
        split_groups(8, 1.0, 0.0)
    with pytest.raises(ValueError, match="total"):
        split_groups(0, 0.5, 0.0)


def test_schedule_is_linear_from_first_to_last_iteration():
    assert scheduled_ratio(0.9, None, budget_spent(7, 10, 0, None)) == 0.9
    assert scheduled_ratio(0.9, 0.5, budget_spent(1, 5, 0, None)) == pytest.approx(0.9)
    assert scheduled_ratio(0.9, 0.5, budget_spent(3, 5, 0, None)) == pytest.approx(0.7)
    assert scheduled_ratio(0.9, 0.5, budget_spent(5, 5, 0, None)) == pytest.approx(0.5)


def test_schedule_follows_the_real_step_budget_when_that_ends_the_run_first():
    # 200 iterations allowed but a 2,000-step budget: after 500 real steps (iteration 11) a quarter is spent.
    assert budget_spent(11, 200, 500, 2000) == pytest.approx(0.25)
    assert scheduled_ratio(0.75, 0.25, budget_spent(11, 200, 500, 2000)) == pytest.approx(0.625)
    # The iterations end it first: their share counts; past either budget the ratio stays at its end.
    assert budget_spent(101, 201, 10, 2000) == pytest.approx(0.5)
    assert budget_spent(3, 200, 2500, 2000) == 1.0
    assert scheduled_ratio(0.75, 0.25, budget_spent(3, 200, 2500, 2000)) == pytest.approx(0.25)
    assert budget_spent(1, 1, 0, None) == 0.0  # a one-iteration run plays its first iteration's ratio


def test_branchable_turns_skip_the_end_and_done_turns():
    assert branchable_turns(episode([0, 0, 1])) == [1, 2]
    assert branchable_turns(episode([0])) == []


def test_branch_points_respect_start_share_and_are_seeded():
    pool = [episode([0, 0, 0, 1], trajectory_id=i) for i in range(3)]
    all_start = sample_branch_points(pool, 20, start_share=1.0, rng=random.Random(0))
    assert {k for _, k in all_start} == {0}
    middle = sample_branch_points(pool, 200, start_share=0.0, rng=random.Random(0))
    assert {k for _, k in middle} == {1, 2, 3}
    again = sample_branch_points(pool, 200, start_share=0.0, rng=random.Random(0))
    assert [(t.trajectory_id, k) for t, k in middle] == [(t.trajectory_id, k) for t, k in again]
    with pytest.raises(ValueError, match="no real trajectory"):
        sample_branch_points([episode([1], source="imagined")], 1, start_share=0.5, rng=random.Random(0))


def test_gate_opens_and_closes_with_the_score():
    gate = ImaginationGate(threshold=0.8)
    assert gate.update(0.5) is None and not gate.is_open
    assert gate.update(0.8) == "opened" and gate.is_open
    assert gate.update(math.nan) is None and gate.is_open
    assert gate.update(0.9) is None
    assert gate.update(0.79) == "closed" and not gate.is_open


def test_return_gap_by_hand():
    real = episode([0.0, 0.0, 1.0])
    assert return_after(real, 1) == 1.0
    # Branch at k=1: imagined continuations return 0.5 and 0 (mean 0.25); real continuation 1 -> -0.75.
    imagined = [episode([0.0, 0.5, 0.0], source="imagined"), episode([0.0, 0.0, 0.0], source="imagined")]
    # Branch at k=0 of a failed episode: imagined 1 vs real 0 -> +1.
    failed = episode([0.0, 0.0])
    gap = imagined_minus_real_return([(real, 1), (failed, 0)], [imagined, [episode([1.0], source="imagined")]])
    assert gap == pytest.approx((-0.75 + 1.0) / 2)


def test_start_return_gap_by_hand():
    # Only the imagined episodes of the k = 0 branch count: returns 1 and 0 (mean 0.5); the mid-episode
    # branch's (return 5) does not. This iteration's real episodes from task starts return 1, 0, 0.
    recorded = episode([0.0, 0.0, 1.0])
    from_start = [episode([1.0], source="imagined"), episode([0.0, 0.0], source="imagined")]
    from_middle = [episode([0.0, 5.0], source="imagined")]
    real_now = [episode([0.0, 1.0]), episode([0.0]), episode([0.0, 0.0])]
    gap = start_return_gap([(recorded, 0), (recorded, 1)], [from_start, from_middle], real_now)
    assert gap == pytest.approx(0.5 - 1 / 3)
    assert math.isnan(start_return_gap([(recorded, 1)], [from_middle], real_now))  # no start branch
    assert math.isnan(start_return_gap([(recorded, 0)], [from_start], []))  # nothing real this iteration


@pytest.mark.parametrize(
    "field, value",
    [("ratio", 1.0), ("ratio", -0.1), ("mode", "both"), ("horizon", 0), ("gate_threshold", 1.5), ("fit_steps", 0)],
)
def test_config_names_the_bad_key(field, value):
    with pytest.raises(ValueError, match=f"imagination.{field}"):
        ImaginationConfig(**{field: value})


def test_enabled_only_with_some_imagination():
    assert not ImaginationConfig().enabled
    assert ImaginationConfig(ratio=0.5).enabled
    assert ImaginationConfig(ratio_end=0.2).enabled
