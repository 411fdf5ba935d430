"""Early stopping of a refit on a held-out split: fit no more steps than the held-out loss rewards.

``early_stop`` is the decision, a pure function of the held-out losses so far; ``EarlyStop`` holds
its settings and how often the loss is read (``imagination.fit_holdout`` and the keys beside it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def early_stop(losses: Sequence[float], patience: int, min_delta: float) -> int | None:
    """The evaluation to stop at, or None to go on.

    ``losses[i]``: the held-out loss at evaluation ``i`` (0: before the first step). An evaluation
    improves on the best so far when its loss is below ``best - min_delta``; the fit stops at the
    first evaluation that is ``patience`` evaluations after the last improvement. A NaN loss never
    improves.
    """
    best, best_at = math.inf, 0
    for i, loss in enumerate(losses):
        if loss < best - min_delta:  # the first finite loss always improves on inf
            best, best_at = loss, i
        if i - best_at >= patience:
            return i
    return None


@dataclass(frozen=True)
class EarlyStop:
    every: int
    """Optimiser steps between readings of the held-out loss."""
    patience: int
    """Readings without an improvement before the fit stops."""
    min_delta: float
    """How far below the best a reading must be to count as an improvement."""
