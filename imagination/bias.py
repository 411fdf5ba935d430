"""Measures of how far imagined experience drifts from real experience (logged under ``imagination/*``)."""

from __future__ import annotations

from collections.abc import Sequence

from envs.trajectory import Trajectory


def return_after(trajectory: Trajectory, k: int) -> float:
    """The undiscounted return of ``trajectory`` from turn ``k`` on (its turns ``k``, ``k + 1``, ...)."""
    return sum(turn.reward for turn in trajectory.turns[k:])


def imagined_minus_real_return(
    branches: Sequence[tuple[Trajectory, int]], imagined_groups: Sequence[Sequence[Trajectory]]
) -> float:
    """Mean over branch points of (mean imagined return from the branch) - (the real return from it).

    ``imagined_groups[g]`` are the imagined episodes started from ``branches[g] = (real, k)``; both
    returns count only the turns after the branch point, so the shared real prefix cancels. The real
    episode was played earlier, by the policy of up to ``recent_trajectories`` episodes ago, so the
    gap is model bias plus how much the policy improved since (plus the noise of one real
    continuation per branch); ``benchmarks.imagination_gap`` separates the two on a
    finished run. A turn-less branch trajectory (a training task's start state) has no real
    continuation and is left out. NaN when there is no branch left.
    """
    if len(branches) != len(imagined_groups):
        raise ValueError(f"{len(branches)} branch points for {len(imagined_groups)} imagined groups")
    gaps = []
    for (real, k), group in zip(branches, imagined_groups, strict=True):
        if not group or not real.turns:  # a task's start state (no real episode played from it): no gap
            continue
        imagined = sum(return_after(t, k) for t in group) / len(group)
        gaps.append(imagined - return_after(real, k))
    return sum(gaps) / len(gaps) if gaps else float("nan")


def start_return_gap(
    branches: Sequence[tuple[Trajectory, int]], imagined_groups: Sequence[Sequence[Trajectory]],
    real_now: Sequence[Trajectory],
) -> float:
    """Mean return of the imagined episodes that started at a task's start (branch ``k = 0``) minus
    the mean return of ``real_now``, the real episodes this iteration collected, from task starts too.

    Both sides are played by the same, current policy (imagination runs before the update), on the
    same distribution of training tasks, so in expectation the difference is the world model's bias
    alone, without the policy lag of ``imagined_minus_real_return``; it is noisier, since the tasks
    differ episode by episode. NaN when either side is empty.
    """
    if len(branches) != len(imagined_groups):
        raise ValueError(f"{len(branches)} branch points for {len(imagined_groups)} imagined groups")
    imagined = [return_after(t, 0) for (_, k), group in zip(branches, imagined_groups, strict=True) if k == 0
                for t in group]
    real = [return_after(t, 0) for t in real_now]
    if not imagined or not real:
        return float("nan")
    return sum(imagined) / len(imagined) - sum(real) / len(real)
