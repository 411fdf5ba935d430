"""The rollout records: SampledAction checks, Trajectory fields, and ids that stay unique when merged."""

from __future__ import annotations

import dataclasses
import json

import pytest

from envs.trajectory import (
    SampledAction,
    Trajectory,
    Turn,
    check_unique_ids,
    merge_trajectories,
    next_ids,
)


def traj(trajectory_id: int, group_id: int, n_turns: int = 0) -> Trajectory:
    turns = [Turn(f"o{k}", f"a{k}", f"o{k + 1}", 0.5, False, True, f"o{k}") for k in range(n_turns)]
    return Trajectory("fake", {}, seed=1, group_id=group_id, trajectory_id=trajectory_id, turns=turns)


def test_sampled_action_stores_plain_immutable_numbers() -> None:
    class Scalar:  # stands in for a 0-d tensor or a numpy scalar
        def __init__(self, value):
            self.value = value

        def __int__(self):
            return int(self.value)

        def __float__(self):
            return float(self.value)

    sample = SampledAction("go", [Scalar(3), 4], [Scalar(9)], [Scalar(-0.5)], ended=False)
    assert (sample.prompt_ids, sample.action_ids, sample.logprobs) == ((3, 4), (9,), (-0.5,))
    assert (
        all(type(i) is int for i in sample.prompt_ids + sample.action_ids)
        and type(sample.logprobs[0]) is float
    )
    assert SampledAction("go", (1,), (2,), (-1.0,)).ended is None  # not recorded by this policy
    with pytest.raises(dataclasses.FrozenInstanceError):
        sample.text = "other"


def test_sampled_action_refuses_inconsistent_records() -> None:
    with pytest.raises(ValueError, match="1 logprobs for 2 action ids"):
        SampledAction("go", (1,), (2, 3), (-1.0,))
    with pytest.raises(ValueError, match="ended=True needs"):
        SampledAction("", (1,), (), (), ended=True)


def test_trajectory_defaults_and_branch_turn_range() -> None:
    t = traj(0, 0, n_turns=2)
    assert (t.truncated, t.branch_turn, t.iteration, t.policy_version) == (False, 0, None, None)
    assert Trajectory("fake", {}, 1, 0, 0, turns=t.turns, branch_turn=2).branch_turn == 2
    with pytest.raises(ValueError, match=r"branch_turn 3 is outside 0\.\.2"):
        Trajectory("fake", {}, 1, 0, 0, turns=t.turns, branch_turn=3)
    with pytest.raises(ValueError, match="branch_turn -1"):
        Trajectory("fake", {}, 1, 0, 0, branch_turn=-1)


def test_to_dict_is_plain_data() -> None:
    t = traj(0, 0, n_turns=2)
    t.turns[1].sample = SampledAction("a1", (1, 2), (3,), (-0.25,), ended=True)
    record = t.to_dict()
    assert record["episode_return"] == 1.0 and record["branch_turn"] == 0 and record["truncated"] is False
    assert record["turns"][0]["sample"] is None
    assert record["turns"][1]["sample"] == {
        "text": "a1",
        "prompt_ids": (1, 2),
        "action_ids": (3,),
        "logprobs": (-0.25,),
        "ended": True,
    }
    json.dumps(record)  # serialisable as it is


def test_check_unique_ids_names_every_repeated_id() -> None:
    check_unique_ids([traj(0, 0), traj(1, 0), traj(2, 1)])
    with pytest.raises(ValueError, match=r"trajectory_id\(s\) \[1, 5\] appear more than once"):
        check_unique_ids([traj(5, 0), traj(1, 0), traj(1, 1), traj(2, 1), traj(5, 2)])


def test_merge_concatenates_disjoint_collections_in_order() -> None:
    first, second = [traj(0, 0), traj(1, 0)], [traj(3, 1), traj(2, 2)]
    assert merge_trajectories(first, second, []) == first + second
    assert merge_trajectories() == []


def test_merge_refuses_repeated_trajectory_ids_or_shared_groups() -> None:
    with pytest.raises(ValueError, match=r"trajectory_id\(s\) \[1\]"):
        merge_trajectories([traj(0, 0), traj(1, 0)], [traj(1, 1)])
    with pytest.raises(ValueError, match=r"trajectory_id\(s\) \[4\]"):
        merge_trajectories([traj(4, 0), traj(4, 0)])  # within one collection too
    with pytest.raises(ValueError, match=r"group_id\(s\) \[0, 2\] occur in more than one collection"):
        merge_trajectories([traj(0, 0), traj(1, 2)], [traj(2, 1)], [traj(3, 0), traj(4, 2)])


def test_next_ids_start_past_every_id_held() -> None:
    assert next_ids([]) == (0, 0)
    assert next_ids([traj(7, 0), traj(2, 3)]) == (4, 8)
    assert next_ids(iter([traj(0, 0)])) == (1, 1)  # any iterable
