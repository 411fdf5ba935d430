"""The decisions of the refit rules (``imagination.refit_below``, ``fit_replay``, ``fit_holdout``).

Pure functions, so each can be checked by hand; ``imagination.refit`` applies them. Early stopping
itself is in ``world_model.early_stop`` (the fit loop reads it).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from envs.trajectory import Trajectory


def should_refit(measure: float, threshold: float) -> bool:
    """Refit when the model has fallen behind: its one-step exact match on the newest real turns
    (read before it is fitted on them) is below ``threshold``. NaN (no new real turn): no refit."""
    return not math.isnan(measure) and measure < threshold


def is_new(trajectory: Trajectory, iteration_at_refit: int) -> bool:
    """Collected after the model's last fit (collected at an iteration after ``iteration_at_refit``).
    Warm-start episodes carry no iteration: they are old."""
    return trajectory.iteration is not None and trajectory.iteration > iteration_at_refit


def replay_rows(new: Sequence[bool], fraction: float, rng: random.Random) -> list[int]:
    """Rows to refit on: every new row and ``round(fraction * old)`` of the old ones drawn without
    replacement, in their original order (so ``fraction=1`` keeps every row as it was)."""
    old = [i for i, flag in enumerate(new) if not flag]
    replay = set(rng.sample(old, round(fraction * len(old))))
    return [i for i, flag in enumerate(new) if flag or i in replay]


def holdout_rows(n_new: int, share: float, rng: random.Random) -> list[int]:
    """Positions among ``n_new`` new rows held out of the fit to read its loss on:
    ``round(share * n_new)`` of them, at least one, and never all (one is always left to fit on);
    none with fewer than two new rows."""
    return sorted(rng.sample(range(n_new), holdout_count(n_new, share)))


def holdout_count(n: int, share: float) -> int:
    """How many of ``n`` rows a held-out ``share`` takes: ``round(share * n)``, at least one and never
    all; none with fewer than two rows."""
    return 0 if n < 2 else min(n - 1, max(1, round(share * n)))
