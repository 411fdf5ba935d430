"""Where imagined rollouts start: branch points drawn from recent real episodes (as in MBPO).

A branch point ``(trajectory, k)`` is the real state after the first ``k`` turns of a real episode:
``k = 0`` is its start state, a later ``k`` a mid-episode state the policy really reached. Only
states where the episode had not ended can be branched from.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from envs.trajectory import Trajectory


def branchable_turns(trajectory: Trajectory) -> list[int]:
    """The mid-episode branch points ``k >= 1`` of ``trajectory``: after a turn that did not end it, and
    before its last turn (so a capped rollout from there has at least one turn left to play)."""
    return [k for k in range(1, trajectory.num_turns) if not trajectory.turns[k - 1].done]


def sample_branch_points(
    trajectories: Sequence[Trajectory], count: int, *, start_share: float, rng: random.Random
) -> list[tuple[Trajectory, int]]:
    """``count`` branch points from ``trajectories`` (real episodes with at least one turn).

    Each draws a trajectory uniformly, then with probability ``start_share`` its start (``k = 0``),
    else a uniform mid-episode point (``branchable_turns``; the start when it has none).
    """
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    if not 0.0 <= start_share <= 1.0:
        raise ValueError(f"start_share must be in [0, 1], got {start_share}")
    pool = [t for t in trajectories if t.turns and t.source == "real"]
    if count and not pool:
        raise ValueError("no real trajectory with a turn to branch from")
    points = []
    for _ in range(count):
        trajectory = pool[rng.randrange(len(pool))]
        middle = branchable_turns(trajectory)
        from_start = rng.random() < start_share or not middle
        points.append((trajectory, 0 if from_start else middle[rng.randrange(len(middle))]))
    return points
