"""Pure measures of step-level comparison groups, for ``benchmarks.step_groups``.

- ``exact_match_group_sizes``: the size of each row's GiGPO step group (episode group, anchor).
- ``hgpo_group_sizes``: per row, the largest HGPO level group it belongs to (levels 1 .. K + 1,
  keyed by the last k anchors of its trajectory), and the episode group's size for the base level.
- ``share``: the share of True entries; ``wilson_interval``: a binomial confidence interval.
- ``sign_agreement``: where predicted and measured signs agree, over pairs where both are non-zero.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence

import torch

from benchmarks.ranks import average_ranks


def exact_match_group_sizes(group_ids: Sequence[Hashable], anchors: Sequence[str]) -> torch.Tensor:
    """``(N,)`` long: how many rows share each row's key (episode group, exact anchor)."""
    keys = list(zip(group_ids, anchors, strict=True))
    counts = Counter(keys)
    return torch.tensor([counts[k] for k in keys], dtype=torch.long)


def hgpo_group_sizes(
    group_ids: Sequence[Hashable],
    traj_ids: Sequence[Hashable],
    steps: Sequence[int],
    anchors: Sequence[str],
    *,
    K: int = 2,  # noqa: N803 (HGPO's name)
    base_group: bool = False,
) -> torch.Tensor:
    """``(N,)`` long: the size of the largest comparison group each row is in under HGPO.

    Levels ``k = 1 .. min(K + 1, t + 1)`` key a row by (episode group, the last k anchors of its
    trajectory up to it), t its position among its trajectory's rows; ``base_group`` adds the episode
    group itself. A row whose every group is a singleton gets 1.
    """
    n = len(anchors)
    by_traj: dict[Hashable, list[int]] = {}
    for i in sorted(range(n), key=lambda i: steps[i]):
        by_traj.setdefault(traj_ids[i], []).append(i)
    history: list[tuple[str, ...]] = [()] * n
    for rows in by_traj.values():
        for t, i in enumerate(rows):
            history[i] = tuple(anchors[j] for j in rows[max(0, t - K) : t + 1])
    keys_per_level = [
        [(group_ids[i], history[i][-k:]) if len(history[i]) >= k else ("absent", i) for i in range(n)]
        for k in range(1, K + 2)
    ]
    if base_group:
        keys_per_level.append([(group_ids[i], "episode") for i in range(n)])
    best = torch.ones(n, dtype=torch.long)
    for keys in keys_per_level:
        counts = Counter(keys)
        best = torch.maximum(best, torch.tensor([counts[k] for k in keys], dtype=torch.long))
    return best


def share(flags: torch.Tensor) -> float:
    """The share of True entries (NaN for none)."""
    return float(flags.float().mean()) if flags.numel() else float("nan")


def wilson_interval(successes: int, trials: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (95% for z = 1.96); (NaN, NaN) for no trials."""
    if trials == 0:
        return float("nan"), float("nan")
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def sign_agreement(predicted: torch.Tensor, measured: torch.Tensor) -> tuple[int, int]:
    """``(agreeing, counted)``: over entries where both are non-zero, how many have the same sign."""
    if predicted.shape != measured.shape:
        raise ValueError(f"predicted {tuple(predicted.shape)} and measured {tuple(measured.shape)} differ")
    counted = (predicted != 0) & (measured != 0)
    agree = counted & (torch.sign(predicted) == torch.sign(measured))
    return int(agree.sum()), int(counted.sum())


def spearman(x: torch.Tensor, y: torch.Tensor) -> float:
    """Spearman's rank correlation of two (n,) tensors (average ranks for ties); NaN if either is constant."""
    if x.shape != y.shape or x.dim() != 1:
        raise ValueError("spearman needs two (n,) tensors of one shape")

    def ranks(v: torch.Tensor) -> torch.Tensor:
        return torch.tensor(average_ranks(v.double().tolist()), dtype=torch.float64)

    rx, ry = ranks(x), ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denominator = float(rx.norm() * ry.norm())
    return float((rx * ry).sum()) / denominator if denominator > 0 else float("nan")
