"""The multi-process plumbing of the loop, without processes: shares, refusals, the JSON exchange, ids.

Two "ranks" run as threads around a fake Fabric whose ``all_gather`` meets at a barrier, so the real
gathering code runs as it would on two processes; the expected ids are worked out by hand.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist
from hypothesis import given
from hypothesis import strategies as st

from envs.collect import EnvFailure
from envs.trajectory import SampledAction, Trajectory, Turn
from experiments.distributed import (
    Collection,
    _run_then_close_group,
    all_gather_json,
    check_multi_process,
    gather_collection,
    rows_of_rank,
    shard,
    trajectory_from_json,
    trajectory_to_json,
)


class ThreadFabric:
    """``world_size`` ranks as threads: ``all_gather`` stacks every rank's tensor once all have arrived."""

    def __init__(self, rank: int, shared: dict) -> None:
        self.global_rank, self.world_size, self.device, self.shared = (
            rank,
            shared["size"],
            torch.device("cpu"),
            shared,
        )

    def all_gather(self, tensor: torch.Tensor) -> torch.Tensor:
        self.shared["slots"][self.global_rank] = tensor.clone()
        self.shared["barrier"].wait()
        stacked = torch.stack(self.shared["slots"])
        self.shared["barrier"].wait()  # nobody overwrites a slot before everyone has read them
        return stacked


def on_ranks(size: int, work) -> list:
    """``work(fabric)`` on ``size`` thread ranks; their results in rank order."""
    shared = {"size": size, "slots": [None] * size, "barrier": threading.Barrier(size, timeout=10)}
    results, errors = [None] * size, []

    def run(rank: int) -> None:
        try:
            results[rank] = work(ThreadFabric(rank, shared))
        except BaseException as error:  # surfaced below; a hung barrier times out instead of blocking
            errors.append(error)
            shared["barrier"].abort()

    threads = [threading.Thread(target=run, args=(rank,)) for rank in range(size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


def episode(group_id: int, trajectory_id: int, reward: float = 0.0) -> Trajectory:
    sample = SampledAction(
        text="guess 3", prompt_ids=(5, 6), action_ids=(7, 2), logprobs=(-0.25, -1.5), ended=True
    )
    turn = Turn(
        observation="pick",
        action="guess 3",
        next_observation="higher",
        reward=reward,
        done=True,
        valid=True,
        anchor_observation="start",
        sample=sample,
    )
    return Trajectory(
        "hidden_number",
        {"low": 1},
        seed=9,
        group_id=group_id,
        trajectory_id=trajectory_id,
        turns=[turn],
        success=reward > 0,
        iteration=4,
        policy_version=3,
    )


@given(count=st.integers(0, 50), size=st.integers(1, 8))
def test_shards_cover_everything_in_order_and_differ_by_at_most_one(count, size):
    shares = [shard(count, size, rank) for rank in range(size)]
    assert [i for share in shares for i in share] == list(range(count))
    assert max(map(len, shares)) - min(map(len, shares)) <= 1


def run_config(devices=2, strategy="ddp_spawn", groups=4, resume=None):
    trainer = SimpleNamespace(devices=devices, num_nodes=1, strategy=strategy, groups_per_iteration=groups)
    return SimpleNamespace(trainer=trainer, resume=resume)


def test_refusals_name_the_keys():
    check_multi_process(run_config())  # 4 groups on 2 processes with ddp_spawn: fine
    check_multi_process(run_config(devices=1, strategy="auto", groups=3))  # one process: nothing to check
    with pytest.raises(ValueError, match="trainer.strategy=ddp_spawn"):
        check_multi_process(run_config(strategy="ddp"))
    with pytest.raises(
        ValueError, match="trainer.groups_per_iteration=3 must be a multiple of the 2 processes"
    ):
        check_multi_process(run_config(groups=3))
    with pytest.raises(ValueError, match="resume with trainer.devices"):
        check_multi_process(run_config(resume="/some/run"))


def test_a_trajectory_crosses_as_json_with_its_sampled_ids():
    original = episode(2, 7, reward=1.0)
    copy = trajectory_from_json(trajectory_to_json(original))
    assert copy == original
    assert copy.turns[0].sample.action_ids == (7, 2) and copy.turns[0].sample.logprobs == (-0.25, -1.5)


def test_all_gather_json_returns_every_ranks_value_in_rank_order():
    values = on_ranks(
        3, lambda fabric: all_gather_json(fabric, {"rank": fabric.global_rank, "x": "é" * fabric.global_rank})
    )
    assert values == [[{"rank": r, "x": "é" * r} for r in range(3)]] * 3


def test_gathered_collection_has_global_ids_failures_and_kept_groups():
    """Rank 0 played 2 groups of 2 (local trajectory ids 0-3), rank 1 played 2 groups whose last episode
    failed (ids 0-2 returned, 3 used); the iteration's ids start at group 10, trajectory 100."""

    def work(fabric):
        local = [episode(g, 2 * g + j, reward=float(j)) for g in range(2) for j in range(2)]
        faults = []
        if fabric.global_rank == 1:
            failed = local.pop()  # trajectory 3 of group 1: its env raised
            faults = [EnvFailure(failed, turn=0, action="guess 3", error=RuntimeError("boom"))]
        collection = Collection(local, local, faults, groups_used=2, trajectories_used=4, rounds=1)
        return gather_collection(fabric, collection, first_group=10, first_trajectory=100, relabelled=False)

    rank0, rank1 = on_ranks(2, work)
    for gathered in (rank0, rank1):
        assert [(t.group_id, t.trajectory_id) for t in gathered.collected] == [
            (10, 100),
            (10, 101),
            (11, 102),
            (11, 103),
            (12, 104),
            (12, 105),
            (13, 106),
        ]
        assert gathered.kept == gathered.collected
        assert (gathered.groups_used, gathered.trajectories_used, gathered.rounds) == (4, 8, 1)
        assert len(gathered.faults) == 1 and "trajectory 107 of group 13" in gathered.faults[0]
        assert gathered.collected[0].turns[0].sample.prompt_ids == (5, 6)


def test_dynamic_sampling_kept_groups_are_numbered_across_ranks():
    """Kept groups count from 0 on each rank (rank 0 kept one, rank 1 two); gathered: 0, then 1 and 2."""

    def work(fabric):
        collected = [episode(g, 2 * g + j, reward=float(j)) for g in range(2) for j in range(2)]
        kept_groups = [1] if fabric.global_rank == 0 else [0, 1]
        kept = [
            Trajectory(**{**vars(t), "group_id": kept_groups.index(t.group_id)})
            for t in collected
            if t.group_id in kept_groups
        ]
        collection = Collection(collected, kept, [], groups_used=2, trajectories_used=4, rounds=2)
        return gather_collection(fabric, collection, first_group=0, first_trajectory=0, relabelled=True)

    gathered = on_ranks(2, work)[1]
    assert [(t.group_id, t.trajectory_id) for t in gathered.kept] == [
        (0, 2),
        (0, 3),
        (1, 4),
        (1, 5),
        (2, 6),
        (2, 7),
    ]
    # the kept copies are relabelled; the collected episodes keep their own group ids
    assert [t.group_id for t in gathered.collected] == [0, 0, 1, 1, 2, 2, 3, 3]


def test_update_rows_split_evenly_or_whole_when_fewer_rows_than_ranks():
    shares = on_ranks(2, lambda fabric: rows_of_rank(fabric, 5))
    assert [s.tolist() for s in shares] == [[0, 1], [2, 3, 4]]
    assert on_ranks(2, lambda fabric: rows_of_rank(fabric, 1)) == [None, None]  # both train on the one row


class ClosingFabric(SimpleNamespace):
    """One rank of a real (one-process, gloo) group; ``barrier`` is counted, not waited on."""

    def barrier(self) -> None:
        self.barriers += 1


def one_rank_group(tmp_path) -> None:
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)


def test_a_launched_rank_closes_its_process_group_after_a_barrier(tmp_path):
    one_rank_group(tmp_path)
    fabric = ClosingFabric(barriers=0)
    seen = []

    def work(fabric, value):
        seen.append(dist.is_initialized())
        return value * 2

    assert _run_then_close_group(fabric, work, 21) == 42
    assert seen == [True]  # the group was open while the work ran
    assert fabric.barriers == 1
    assert not dist.is_initialized()  # and closed before the process exits


def test_a_failing_rank_still_closes_its_group_and_raises_without_a_barrier(tmp_path):
    one_rank_group(tmp_path)
    fabric = ClosingFabric(barriers=0)

    def work(fabric):
        raise RuntimeError("env broke")

    with pytest.raises(RuntimeError, match="env broke"):
        _run_then_close_group(fabric, work)
    assert fabric.barriers == 0  # a barrier would wait forever for the ranks that did not fail
    assert not dist.is_initialized()
