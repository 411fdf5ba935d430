"""Edges of the report's curve math, worked by hand (mutants of experiments/reporting/curves.py that survived)."""

from __future__ import annotations

import pytest

from experiments.reporting.curves import MeanCurve, held_target_bound, mark_curve, mean_curve, t_interval


def test_two_seeds_give_a_t_interval_with_one_degree_of_freedom():
    # values 1 and 3: mean 2, s = sqrt(2); t(0.975, 1) = 12.7062 (tables); half = 12.7062 * sqrt(2) / sqrt(2)
    low, high = t_interval([1.0, 3.0])
    assert (low, high) == pytest.approx((2.0 - 12.7062, 2.0 + 12.7062), abs=1e-3)
    assert t_interval([1.0]) is None


def test_no_usable_curve_gives_an_empty_mean_curve_of_zero_seeds():
    assert mean_curve([[], []]) == MeanCurve([], [], [], 0)


def test_marks_one_step_apart_are_allowed():
    # evaluations at steps 0 and 2: marks 0, 1, 2 read the first evaluation at or after each
    assert mark_curve([(0.0, 0.1), (2.0, 0.5)], 1) == [(0.0, 0.1), (1.0, 0.5), (2.0, 0.5)]


def test_the_bound_uses_the_hold_it_is_given():
    # 0.9 on the last two of five marks: held with hold 1 (crossing at 300, confirmed at 400), so no bound;
    # with hold 3 it is not held, and the bound is the first of the last three marks, 200.
    points = [(0.0, 0.1), (100.0, 0.2), (200.0, 0.3), (300.0, 0.9), (400.0, 0.9)]
    assert held_target_bound(points, 0.8, hold=1) is None
    assert held_target_bound(points, 0.8, hold=3) == 200.0
