"""Pure summary statistics: AUROC (Mann-Whitney), reliability bins, and when a target was first met."""

from __future__ import annotations

import math
from collections.abc import Sequence

from benchmarks.ranks import average_ranks


def auroc(scores: Sequence[float], positives: Sequence[bool]) -> float:
    """P(score of a random positive > score of a random negative), ties counting 1/2.

    The Mann-Whitney U statistic over ``n_pos * n_neg``, from average ranks (O(n log n)). NaN when
    there is no positive or no negative: the question has no answer.
    """
    if len(scores) != len(positives):
        raise ValueError(f"{len(scores)} scores for {len(positives)} labels")
    n_pos = sum(bool(p) for p in positives)
    n_neg = len(positives) - n_pos
    if n_pos == 0 or n_neg == 0:
        return math.nan
    ranks = [rank + 1 for rank in average_ranks(scores)]  # 1-based, ties averaged
    rank_sum = sum(r for r, p in zip(ranks, positives, strict=True) if p)
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def reliability(probs: Sequence[float], hits: Sequence[bool], bins: int = 10) -> list[tuple[float, float, int]]:
    """Equal-width bins of predicted probability: ``(mean predicted, observed frequency, count)`` of
    each non-empty bin, in order (1.0 falls in the last bin)."""
    totals = [[0.0, 0.0, 0] for _ in range(bins)]
    for p, hit in zip(probs, hits, strict=True):
        b = totals[min(int(p * bins), bins - 1)]
        b[0] += p
        b[1] += float(hit)
        b[2] += 1
    return [(s / n, h / n, n) for s, h, n in totals if n]


def calibration_error(probs: Sequence[float], hits: Sequence[bool], bins: int = 10) -> float:
    """Expected calibration error: count-weighted mean |predicted - observed| over the bins."""
    table = reliability(probs, hits, bins)
    total = sum(n for _, _, n in table)
    return sum(n * abs(p - f) for p, f, n in table) / total if total else math.nan
