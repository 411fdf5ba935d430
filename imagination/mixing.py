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


def budget_spent(iteration: int, iterations: int, real_env_steps: int, max_env_steps: int | None) -> float:
    """How far the run is through its budget, in [0, 1], at the start of ``iteration`` (1-based):
    ``(iteration - 1) / (iterations - 1)``, or the share of ``max_env_steps`` already spent when
    that is larger (a run ends at whichever budget it reaches first, so the larger share is the one
    that ends it)."""
    by_iterations = (iteration - 1) / (iterations - 1) if iterations > 1 else 0.0  # one iteration: its first
    by_steps = real_env_steps / max_env_steps if max_env_steps else 0.0
    return min(max(by_iterations, by_steps, 0.0), 1.0)


def scheduled_ratio(start: float, end: float | None, spent: float) -> float:
    """The ratio once ``spent`` (``budget_spent``) of the run's budget is used: ``start`` throughout
    when ``end`` is None, else linear from ``start`` to ``end`` over the budget."""
    if end is None:
        return start
    return start + (end - start) * min(max(spent, 0.0), 1.0)


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
