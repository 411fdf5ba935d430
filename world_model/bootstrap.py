"""Bootstrapped batches per ensemble member: each member trains on its own resample of the batch.

Members that see the same batches and differ only by initialisation agree wherever the shared data
pulls them to the same answer, also where that answer is wrong. Bagging (Breiman; the bootstrapped
ensembles of Osband et al.) gives every member its own resample, so members also differ where the
data is thin. With the members batched the resample costs nothing extra: member ``k`` weights the
batch's trajectory ``b`` by how often ``b`` was drawn in its resample, which equals training it on
the resampled batch (every loss term is a mean over tokens or turns).
"""

from __future__ import annotations

import torch


def bootstrap_counts(members: int, rows: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """``(K, B)`` float: how often each of ``rows`` items is drawn when each of ``members`` draws
    ``rows`` items uniformly with replacement; each member's row sums to ``rows``."""
    draws = torch.randint(rows, (members, rows), generator=generator)  # (K, B)
    return torch.zeros(members, rows).scatter_add_(1, draws, torch.ones(members, rows))  # (K, B)


def weighted_mean(values: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``(K, R)`` values, ``(K, R)`` weights -> ``(K,)`` weighted means (0 where a member's weights are 0)."""
    return (values * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-12)  # (K,)
