"""Edge cases of the imagined-minus-real return gaps, by hand: rewards before the branch point, branch
points with no imagined episode, no branch at all, and a real episode rewarded on its first turn."""

from __future__ import annotations

import math

import pytest

from envs.trajectory import Trajectory, Turn
from imagination.bias import imagined_minus_real_return, start_return_gap


def episode(rewards, source="real") -> Trajectory:
    turns = [
        Turn(observation=f"o{i}", action=f"a{i}", next_observation=f"o{i + 1}", reward=r,
             done=i == len(rewards) - 1, valid=True, anchor_observation=f"o{i}")
        for i, r in enumerate(rewards)
    ]
    return Trajectory(env_name="hidden_number", env_kwargs={}, seed=7, group_id=0, trajectory_id=0,
                      source=source, turns=turns)


def test_the_shared_prefix_before_the_branch_does_not_count():
    # Branch at k=2: the real prefix pays 0.5 + 0.25; after it the real episode earns 1, the imagined
    # ones 0 and 2 (mean 1) -> gap 0. Counting the prefix on either side alone would move it by 0.75.
    real = episode([0.5, 0.25, 1.0])
    imagined = [episode([0.5, 0.25, 0.0], "imagined"), episode([0.5, 0.25, 2.0], "imagined")]
    assert imagined_minus_real_return([(real, 2)], [imagined]) == pytest.approx(0.0)
    # Imagined prefix differs from the real one (3 vs 0.75): still only the turns after k count.
    imagined = [episode([3.0, 0.0, 0.5], "imagined")]
    assert imagined_minus_real_return([(real, 2)], [imagined]) == pytest.approx(0.5 - 1.0)


def test_branch_points_without_imagined_episodes_are_skipped_not_the_end():
    # The first branch point has no imagined episode; the second's gap (1 - 0 = 1) is the mean.
    real = episode([0.0, 0.0])
    gap = imagined_minus_real_return([(real, 0), (real, 1)], [[], [episode([0.0, 1.0], "imagined")]])
    assert gap == pytest.approx(1.0)


def test_no_imagined_episode_at_all_is_nan():
    real = episode([1.0])
    assert math.isnan(imagined_minus_real_return([(real, 0)], [[]]))
    assert math.isnan(imagined_minus_real_return([], []))


def test_real_episodes_count_from_their_first_turn():
    # Imagined from the start: 0; real now: 1 (earned on turn 0) and 0 -> gap 0 - 0.5.
    recorded = episode([0.0])
    gap = start_return_gap([(recorded, 0)], [[episode([0.0], "imagined")]], [episode([1.0, 0.0]), episode([0.0])])
    assert gap == pytest.approx(-0.5)


@pytest.mark.parametrize("gap_fn", [imagined_minus_real_return,
                                    lambda b, g: start_return_gap(b, g, [episode([1.0])])])
def test_unequal_branches_and_groups_are_named(gap_fn):
    real = episode([1.0])
    with pytest.raises(ValueError, match="2 branch points for 1 imagined groups"):
        gap_fn([(real, 0), (real, 0)], [[real]])
