"""95% intervals for real steps to a target over a few seeds, on the log scale.

Steps to a target are positive counts whose spread grows with their size (one seed at 5k, another at
10k), and with three seeds a Student-t interval of the raw mean runs below zero (250 [-385, 885] for
200 and 300 steps). Both intervals here are t intervals of a mean log, exponentiated: a count's
interval is one of its geometric mean and is never negative; a ratio's is one of its geometric mean
ratio and never crosses zero.

Two arms are compared seed by seed (seed i of one against seed i of the other: both start from the
same warm start, cloned once per env and seed, so the pairing removes what the seed alone explains). The
interval is Student's t on the per-seed log ratios, not a bootstrap over seeds: with 3-5 seeds a
bootstrap resample draws from at most a handful of distinct values (10 multisets for 3 seeds), its
percentile interval never reaches beyond the smallest and largest observed ratio, and so it covers
the true ratio far less often than 95% (a sample of 3 misses the median of a symmetric spread with
probability 2 * (1/2)^3 = 1/4). The t interval widens with few seeds as it should.

With fewer than two values, or a value that is not positive, there is no interval (None), and a
report prints ``TOO_FEW`` in its place.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from experiments.reporting.curves import mean_and_std, t_quantile

TOO_FEW = "too few seeds to bound"

# The quantile depends only on the level and the seed count, and takes ~0.1 s to integrate: once each.
_t_quantile = functools.lru_cache(maxsize=None)(t_quantile)


def geometric_mean(values: Sequence[float]) -> float:
    """exp of the mean log of ``values``, all > 0. Raises ValueError otherwise or with no values."""
    _check_positive(values)
    return math.exp(sum(math.log(v) for v in values) / len(values))


def log_t_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float] | None:
    """The ``level`` interval of the geometric mean of positive ``values`` (one per seed): a Student-t
    interval of the mean log, exp(m -+ t * s / sqrt(n)), with m and s the mean and sample deviation of
    the logs and t the quantile with n - 1 degrees of freedom. Both bounds are > 0 and bracket the
    geometric mean. None for fewer than two values or any value <= 0 (a log scale has no room for it)."""
    if len(values) < 2 or any(not v > 0 for v in values):
        return None
    mean, std = mean_and_std([math.log(v) for v in values])
    half = _t_quantile(0.5 + level / 2, len(values) - 1) * std / math.sqrt(len(values))
    return math.exp(mean - half), math.exp(mean + half)


@dataclass(frozen=True)
class PairedRatio:
    ratio: float  # exp(mean log(b_i / a_i)): the geometric mean of the per-seed ratios
    interval: tuple[float, float] | None  # its 95% interval; None with fewer than two pairs
    pairs: int


def paired_log_ratio(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> PairedRatio:
    """How many times ``b`` is ``a``, seed by seed: ``a[i]`` and ``b[i]`` are the same seed of two arms
    (all > 0). The ratio is the geometric mean of b_i / a_i and its interval ``log_t_interval`` of
    those ratios. Raises ValueError for unequal lengths, no pairs, or a value <= 0."""
    if len(a) != len(b):
        raise ValueError(f"paired_log_ratio needs one value per seed in each arm, got {len(a)} and {len(b)}")
    _check_positive([*a, *b])
    ratios = [y / x for x, y in zip(a, b, strict=True)]
    return PairedRatio(geometric_mean(ratios), log_t_interval(ratios, level), len(ratios))


def interval_text(interval: tuple[float, float] | None, fmt: str = "{:,.0f}") -> str:
    """``[low, high]`` in ``fmt``, or ``TOO_FEW`` when there is no interval."""
    if interval is None:
        return TOO_FEW
    return f"[{fmt.format(interval[0])}, {fmt.format(interval[1])}]"


def _check_positive(values: Sequence[float]) -> None:
    if not values:
        raise ValueError("needs at least one value")
    bad = [v for v in values if not v > 0]
    if bad:
        raise ValueError(f"a log-scale statistic needs values > 0, got {bad}")
