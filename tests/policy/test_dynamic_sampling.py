import pytest
import torch

from envs.trajectory import Trajectory, Turn
from policy.dynamic_sampling import fill_with_informative_groups, informative_group_mask


def traj(group_id: int, ret: float, trajectory_id: int = 0) -> Trajectory:
    turn = Turn("obs", "act", "next", ret, True, True, "obs")
    return Trajectory("toy", {}, seed=group_id, group_id=group_id, trajectory_id=trajectory_id, turns=[turn])


def test_mask_marks_groups_whose_rewards_differ():
    # group 7: {1, 0} informative; group 3: {1, 1, 1} not; group 5: single row, not; group 2: {0, 0.5}.
    group_ids = torch.tensor([7, 3, 7, 3, 5, 2, 3, 2])
    rewards = torch.tensor([1.0, 1.0, 0.0, 1.0, 0.3, 0.0, 1.0, 0.5])
    mask = informative_group_mask(group_ids, rewards)
    assert mask.dtype == torch.bool
    assert mask.tolist() == [True, False, True, False, False, True, False, True]


def test_mask_accepts_lists_and_empty_input():
    assert informative_group_mask([0, 0, 1, 1], [0.0, 0.0, 2.0, 1.0]).tolist() == [False, False, True, True]
    assert informative_group_mask([], []).tolist() == []
    with pytest.raises(ValueError, match="must both be \\(N,\\)"):
        informative_group_mask([0, 1], [1.0])


def rounds_of(*rounds):
    """A sample_fn that replays the given rounds and records the round numbers it was asked for."""
    asked = []

    def sample_fn(round_index):
        asked.append(round_index)
        return rounds[round_index]

    return sample_fn, asked


def test_fill_keeps_informative_groups_relabels_and_stops_at_target():
    round0 = [traj(0, 1.0, 0), traj(0, 1.0, 1), traj(1, 0.0, 2), traj(1, 1.0, 3)]  # only group 1 informative
    round1 = [traj(0, 0.0, 0), traj(0, 1.0, 1), traj(1, 0.0, 2), traj(1, 0.0, 3)]  # only group 0 informative
    round2 = [traj(0, 0.0, 0), traj(0, 2.0, 1)]
    sample_fn, asked = rounds_of(round0, round1, round2)
    kept, rounds_used = fill_with_informative_groups(sample_fn, target_groups=2, max_rounds=5)
    assert rounds_used == 2 and asked == [0, 1]
    # Round 0's group 1 becomes 0; round 1's group 0 becomes 1 (it would collide without relabelling).
    assert [(t.group_id, t.trajectory_id, t.episode_return) for t in kept] == [
        (0, 2, 0.0),
        (0, 3, 1.0),
        (1, 0, 0.0),
        (1, 1, 1.0),
    ]
    assert [t.group_id for t in round1] == [0, 0, 1, 1]  # the caller's objects are untouched


def test_fill_cuts_at_exactly_target_groups_keeping_groups_whole():
    round0 = [traj(4, 0.0), traj(9, 1.0), traj(4, 1.0), traj(9, 0.0), traj(2, 0.0), traj(2, 5.0)]
    sample_fn, _ = rounds_of(round0)
    kept, rounds_used = fill_with_informative_groups(sample_fn, target_groups=2, max_rounds=3)
    assert rounds_used == 1
    # Groups in first-appearance order (4, then 9); group 2 is cut; members stay in batch order.
    assert [(t.group_id, t.seed, t.episode_return) for t in kept] == [
        (0, 4, 0.0),
        (0, 4, 1.0),
        (1, 9, 1.0),
        (1, 9, 0.0),
    ]


def test_fill_is_bounded_by_max_rounds():
    uninformative = [traj(0, 1.0), traj(0, 1.0)]
    informative = [traj(0, 1.0), traj(0, 0.0)]
    sample_fn, asked = rounds_of(uninformative, informative, uninformative, informative)
    kept, rounds_used = fill_with_informative_groups(sample_fn, target_groups=3, max_rounds=3)
    assert rounds_used == 3 and asked == [0, 1, 2]
    assert [t.group_id for t in kept] == [0, 0]


def test_fill_validates_its_arguments():
    with pytest.raises(ValueError, match="target_groups"):
        fill_with_informative_groups(lambda r: [], target_groups=0, max_rounds=1)
    with pytest.raises(ValueError, match="max_rounds"):
        fill_with_informative_groups(lambda r: [], target_groups=1, max_rounds=0)
