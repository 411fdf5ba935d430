"""Tie-averaged ranks, shared by the benchmarks' rank statistics (AUROC, Spearman)."""

from __future__ import annotations

from collections.abc import Sequence


def average_ranks(values: Sequence[float]) -> list[float]:
    """0-based rank of each value in ascending order; a block of tied values shares its average rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        stop = start
        while stop + 1 < len(order) and values[order[stop + 1]] == values[order[start]]:
            stop += 1
        for i in order[start : stop + 1]:
            ranks[i] = (start + stop) / 2
        start = stop + 1
    return ranks
