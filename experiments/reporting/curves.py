"""Pure statistics over evaluation curves and seeds.

A curve is a list of ``(real env steps, value)`` sorted by steps. Conventions used throughout:

- Steps to a target never interpolate. The report reads them on a grid of real-step marks
  (``mark_curve``) as the first mark held at or above the target for the next two marks
  (``steps_to_held_target``); ``steps_to_target``, the first evaluation at or above it, is the
  first-crossing rule that more frequent looks bias, kept for comparison.
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


HOLD_MARKS = 2  # marks after the crossing that must stay at or above the target


def mark_curve(curve: Curve, every: float) -> list[tuple[float, float]]:
    """The curve read on the mark grid 0, ``every``, 2 * ``every``, ...: each mark gets the first
    evaluation at or after it (the one the training loop ran for that mark on
    ``trainer.eval_every_steps``; for a run evaluated on another schedule, the first look after the
    mark), up to the run's last evaluation. One value per mark, whatever the number of looks."""
    if not every > 0:
        raise ValueError(f"the mark spacing must be > 0 real env steps, got {every}")
    points, index, mark = [], 0, 0.0
    curve = list(curve)
    while curve and mark <= curve[-1][0]:
        while curve[index][0] < mark:
            index += 1
        points.append((mark, curve[index][1]))
        mark += every
    return points


def steps_to_held_target(points: Curve, target: float, hold: int = HOLD_MARKS) -> float | None:
    """The first grid point whose value and the next ``hold`` values are all at or above ``target``,
    or None if there is none (a crossing in the last ``hold`` points of a run is unconfirmed and
    does not count). On a grid shared by every arm, one noisy evaluation above the target cannot
    count on its own, and more frequent looks give no earlier answer."""
    values = [value for _, value in points]
    for i in range(len(values) - hold):
        if all(v >= target for v in values[i:i + hold + 1]):
            return points[i][0]
    return None


def held_target_bound(points: Curve, target: float, hold: int = HOLD_MARKS) -> float | None:
    """A lower bound on the steps to a held ``target`` of a run that did not hold it
    (``steps_to_held_target`` is None): the first of its last ``hold`` grid points, the earliest
    crossing that more marks could still confirm (every earlier one was checked and did not hold).
    None for a run that held it, or an empty curve."""
    if not points or steps_to_held_target(points, target, hold) is not None:
        return None
    return points[max(0, len(points) - hold)][0]


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (bisection on its CDF,
    integrated with Simpson's rule; exact to about 1e-6 for the small ``df`` of a few seeds)."""
    if not 0.5 <= p < 1 or df < 1:
        raise ValueError(f"t_quantile needs 0.5 <= p < 1 and df >= 1, got p={p}, df={df}")
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)

    def cdf_above_half(x: float, n: int = 2000) -> float:
        # P(0 < T <= x) with the substitution t = tan(u), which keeps the integrand smooth on a finite range
        end = math.atan(x)
        h = end / n
        total = 0.0
        for i in range(n + 1):
            u = i * h
            t = math.tan(u)
            f = math.exp(log_norm - (df + 1) / 2 * math.log1p(t * t / df)) / math.cos(u) ** 2
            total += f * (1 if i in (0, n) else 4 if i % 2 else 2)
        return total * h / 3

    low, high = 0.0, 1.0
    while cdf_above_half(high) < p - 0.5:
        high *= 2
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if cdf_above_half(mid) < p - 0.5 else (low, mid)
    return (low + high) / 2


def t_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float] | None:
    """The ``level`` confidence interval of the mean of ``values`` (seeds) by Student's t: mean plus or
    minus t * s / sqrt(n). None for fewer than two values."""
    if len(values) < 2:
        return None
    mean, std = mean_and_std(values)
    half = t_quantile(0.5 + level / 2, len(values) - 1) * std / math.sqrt(len(values))
    return mean - half, mean + half
