"""The break-even cost of a real env step (experiments/reporting/break_even.py)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from experiments.reporting.break_even import break_even_step_cost, format_step_cost


def test_break_even_by_hand():
    # 200 steps at 1 s each (200 s) against 1,000 at 0.1 s (100 s): the 100 s of extra compute is paid
    # back by 800 fewer steps once each costs 100 / 800 = 0.125 s.
    assert break_even_step_cost(200, 1.0, 1000, 0.1) == pytest.approx(0.125)


def test_already_first_at_no_step_cost_and_never_first_with_more_steps():
    assert break_even_step_cost(200, 0.1, 1000, 0.1) == 0.0  # fewer steps, same compute: first already
    assert break_even_step_cost(1000, 1.0, 1000, 0.1) == math.inf  # as many steps, more compute
    assert break_even_step_cost(1200, 1.0, 1000, 0.1) == math.inf


def test_bad_input_is_refused_with_its_name():
    with pytest.raises(ValueError, match="mf_seconds_per_step"):
        break_even_step_cost(1, 1, 1, float("nan"))


@given(st.floats(1, 1e4), st.floats(1e-3, 10), st.floats(1, 1e4), st.floats(1e-3, 10))
def test_at_the_break_even_both_arms_take_the_same_time(mb_steps, mb_s, mf_steps, mf_s):
    cost = break_even_step_cost(mb_steps, mb_s, mf_steps, mf_s)
    mb_time = lambda c: mb_steps * (mb_s + c)  # noqa: E731
    mf_time = lambda c: mf_steps * (mf_s + c)  # noqa: E731
    if math.isinf(cost):
        assert mb_time(1e6) > mf_time(1e6) or mb_steps >= mf_steps
    elif cost == 0:
        assert mb_time(0) <= mf_time(0) * (1 + 1e-9)
    else:
        assert mb_time(cost) == pytest.approx(mf_time(cost), rel=1e-6)
        assert mb_time(cost * 0.5) > mf_time(cost * 0.5)  # cheaper steps: model-free first


def test_format():
    assert format_step_cost(math.inf) == "never"
    assert format_step_cost(0.015) == "15 ms"
    assert format_step_cost(0.25) == "0.25 s"
