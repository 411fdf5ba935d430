"""Pure statistics over evaluation curves and seeds.

A curve is a list of ``(real env steps, value)`` sorted by steps. Conventions used throughout:

- Steps to a target never interpolate: it is the step count of the first evaluation at or above it.
- The spread over seeds is the sample standard deviation (divisor n - 1); with one seed there is
  none (``None``).
- Seeds evaluated at different step counts are combined on a common grid by holding each seed's
  last evaluation (a step function, no interpolation): the grid is the union of the seeds'
  evaluation steps from the latest first evaluation to the earliest last one, so every grid point
  lies where every seed has been evaluated and nothing is extrapolated past a seed's last point.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

Curve = Sequence[tuple[float, float]]


def steps_to_target(curve: Curve, target: float) -> float | None:
    """The real env steps of the first evaluation whose value reaches ``target`` (``>=``), or None if
    none does. No interpolation between evaluations: the answer is always an evaluated step count."""
    for steps, value in curve:
        if value >= target:
            return steps
    return None


def mean_and_std(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (divisor n - 1); the deviation is None for one value.
    Raises ValueError on no values."""
    if not values:
        raise ValueError("mean_and_std needs at least one value")
    n = len(values)
    mean = sum(values) / n
    if n == 1:
        return mean, None
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))


def value_at(curve: Curve, steps: float) -> float:
    """The value of the last evaluation at or before ``steps`` (a step-function hold). Raises
    ValueError before the first evaluation."""
    xs = [x for x, _ in curve]
    index = bisect.bisect_right(xs, steps) - 1
    if index < 0:
        raise ValueError(f"no evaluation at or before {steps} steps (the first is at {xs[0] if xs else None})")
    return curve[index][1]


def value_at_budget(curve: Curve, steps: float) -> float | None:
    """What a run had reached after ``steps`` real env steps: its last evaluation at or before them
    (a hold, as ``value_at``), or None when the run stopped before it got that far (its last
    evaluation is below ``steps``) or had not been evaluated yet. A run is compared at a budget
    only if it spent it."""
    if not curve or curve[-1][0] < steps or curve[0][0] > steps:
        return None
    return value_at(curve, steps)


@dataclass(frozen=True)
class MeanCurve:
    steps: list[float]
    mean: list[float]
    std: list[float | None]  # sample standard deviation over seeds; None with one seed
    seeds: int


def mean_curve(curves: Sequence[Curve]) -> MeanCurve:
    """Mean and spread over seeds on the common grid (see the module docstring). Empty curves are
    left out; no usable curve, or seeds whose evaluations never overlap, give an empty MeanCurve."""
    curves = [list(c) for c in curves if c]
    if not curves:
        return MeanCurve([], [], [], 0)
    start = max(c[0][0] for c in curves)
    end = min(c[-1][0] for c in curves)
    grid = sorted({x for c in curves for x, _ in c if start <= x <= end})
    means, stds = [], []
    for x in grid:
        mean, std = mean_and_std([value_at(c, x) for c in curves])
        means.append(mean)
        stds.append(std)
    return MeanCurve(grid, means, stds, len(curves))
