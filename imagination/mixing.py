"""How many of an update's groups are real and how many imagined: pure functions of the schedule.

The ratio is a share of groups (each group holds ``group_size`` episodes of one start state, so it
is also the share of episodes). A batch of G groups at ratio rho wants G * (1 - rho) real groups,
rarely a whole number: the fractional part is carried to the next iteration as credit, so over a
run the real groups add up to G * sum(1 - rho_i) within one group, and the effective ratio is the
configured one (DreamerV3 checks its replay ratio by counting the same way).
"""

from __future__ import annotations

import math

EPS = 1e-9  # absorbs float error in the running credit (0.1 + 0.2 style)


def scheduled_ratio(start: float, end: float | None, iteration: int, iterations: int) -> float:
    """The ratio at ``iteration`` (1-based) of ``iterations``: ``start`` throughout when ``end`` is None,
    else linear from ``start`` at the first iteration to ``end`` at the last."""
    if end is None or iterations <= 1:
        return start
    progress = (iteration - 1) / (iterations - 1)
    return start + (end - start) * min(max(progress, 0.0), 1.0)


def split_groups(total: int, ratio: float, credit: float) -> tuple[int, int, float]:
    """``(real, imagined, credit)`` for one update of ``total`` groups at ``ratio``.

    ``credit`` is the real-group share carried from earlier iterations (start at 0). ``ratio`` 0
    gives ``(total, 0, credit)`` untouched, whatever the credit: the model-free split.
    """
    if total < 1:
        raise ValueError(f"split_groups: total must be >= 1, got {total}")
    if not 0.0 <= ratio < 1.0:
        raise ValueError(f"split_groups: ratio must be in [0, 1), got {ratio}")
    if ratio == 0.0:
        return total, 0, credit
    credit += total * (1.0 - ratio)
    real = min(total, math.floor(credit + EPS))
    return real, total - real, credit - real
