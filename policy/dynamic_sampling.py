"""DAPO-style dynamic sampling: keep only groups whose rewards differ, resample to fill a batch.

A group whose members all earn the same return has zero group-relative advantage everywhere, so it
adds no gradient; dynamic sampling drops such groups and draws more, a bounded number of times.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import torch


class GroupedSample(Protocol):
    """What dynamic sampling reads from a trajectory (``envs.trajectory.Trajectory`` fits)."""

    group_id: int

    @property
    def episode_return(self) -> float: ...


T = TypeVar("T", bound=GroupedSample)


def informative_group_mask(group_ids: Any, rewards: Any) -> torch.Tensor:
    """``(N,)`` bool: True on rows whose group's rewards are not all equal (exact comparison).

    ``group_ids`` and ``rewards`` are ``(N,)`` (tensors or sequences). A group of one is never
    informative.
    """
    group_ids = torch.as_tensor(group_ids)  # (N,)
    rewards = torch.as_tensor(rewards, dtype=torch.float64)  # (N,)
    if group_ids.shape != rewards.shape or group_ids.dim() != 1:
        raise ValueError(
            f"group_ids {tuple(group_ids.shape)} and rewards {tuple(rewards.shape)} must both be (N,)"
        )
    _, slot = torch.unique(group_ids, return_inverse=True)  # (N,) group slot of each row
    num_groups = int(slot.max()) + 1 if len(slot) else 0
    high = torch.full((num_groups,), -torch.inf, dtype=torch.float64).scatter_reduce(0, slot, rewards, "amax")
    low = torch.full((num_groups,), torch.inf, dtype=torch.float64).scatter_reduce(0, slot, rewards, "amin")
    return (high > low)[slot]  # (N,)


def fill_with_informative_groups(
    sample_fn: Callable[[int], Sequence[T]], target_groups: int, max_rounds: int
) -> tuple[list[T], int]:
    """Call ``sample_fn(round)`` until ``target_groups`` informative groups are kept or ``max_rounds`` are used.

    Groups are kept whole, in the order they first appear, and the batch is cut at exactly
    ``target_groups`` groups (fewer when the rounds run out). Kept trajectories are shallow copies
    whose ``group_id`` is relabelled ``0, 1, 2, ...`` in keep order, so ids stay unique across
    rounds; the caller's objects are not modified. Other ids (e.g. ``trajectory_id``) are left as
    they are. Returns ``(trajectories, rounds_used)``.
    """
    if target_groups < 1:
        raise ValueError(f"target_groups must be >= 1, got {target_groups}")
    if max_rounds < 1:
        raise ValueError(f"max_rounds must be >= 1, got {max_rounds}")
    kept: list[T] = []
    num_kept = 0
    rounds_used = 0
    while num_kept < target_groups and rounds_used < max_rounds:
        batch = list(sample_fn(rounds_used))
        rounds_used += 1
        if not batch:
            continue
        informative = informative_group_mask([t.group_id for t in batch], [t.episode_return for t in batch])
        groups: dict[int, list[T]] = {}  # insertion order = first appearance
        for item, keep in zip(batch, informative.tolist(), strict=True):
            if keep:
                groups.setdefault(item.group_id, []).append(item)
        for members in groups.values():
            if num_kept == target_groups:
                break
            for item in members:
                relabelled = copy.copy(item)
                relabelled.group_id = num_kept
                kept.append(relabelled)
            num_kept += 1
    return kept, rounds_used
