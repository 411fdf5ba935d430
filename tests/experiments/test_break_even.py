"""The break-even cost of a real env step (experiments/reporting/break_even.py): each of the four answers
with numbers worked out by hand."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from experiments.reporting.break_even import (
    ALWAYS,
    AT_LEAST,
    AT_MOST,
    NEVER,
    BreakEven,
    break_even_step_cost,
    break_even_text,
    format_step_cost,
)


def test_fewer_steps_more_compute_is_first_once_a_step_costs_at_least_the_break_even():
    # 200 steps at 1 s each (200 s) against 1,000 at 0.1 s (100 s): the 100 s of extra compute is paid
    # back by 800 fewer steps once each costs 100 / 800 = 0.125 s.
    assert break_even_step_cost(200, 1.0, 1000, 0.1) == BreakEven(AT_LEAST, pytest.approx(0.125))
    # 500 at 0.5 s (250 s) against 1,500 at 0.1 s (150 s): 100 s over 1,000 fewer steps, 0.1 s.
    assert break_even_step_cost(500, 0.5, 1500, 0.1) == BreakEven(AT_LEAST, pytest.approx(0.1))


def test_more_steps_less_compute_is_first_only_while_a_step_costs_at_most_the_break_even():
    # 1,200 steps at 0.05 s (60 s) against 1,000 at 0.1 s (100 s): 40 s ahead at no step cost, lost
    # over 200 more steps once each costs more than 40 / 200 = 0.2 s.
    assert break_even_step_cost(1200, 0.05, 1000, 0.1) == BreakEven(AT_MOST, pytest.approx(0.2))
    # 2,000 at 0 s against 1,000 at 0.3 s (300 s): 300 s over 1,000 more steps, 0.3 s.
    assert break_even_step_cost(2000, 0.0, 1000, 0.3) == BreakEven(AT_MOST, pytest.approx(0.3))
    # as much compute in total (120 s each), more steps: level at no step cost, behind at any other
    assert break_even_step_cost(1200, 0.1, 1000, 0.12) == BreakEven(AT_MOST, pytest.approx(0.0, abs=1e-12))


def test_fewer_steps_no_more_compute_is_always_first():
    assert break_even_step_cost(200, 0.1, 1000, 0.1) == BreakEven(ALWAYS)  # 20 s against 100 s
    assert break_even_step_cost(500, 0.2, 1000, 0.1) == BreakEven(ALWAYS)  # 100 s each: level at c = 0
    assert break_even_step_cost(1000, 0.05, 1000, 0.1) == BreakEven(ALWAYS)  # as many steps, less compute


def test_more_steps_more_compute_is_never_first():
    assert break_even_step_cost(1200, 1.0, 1000, 0.1) == BreakEven(NEVER)  # 1,200 s against 100 s
    assert break_even_step_cost(1000, 1.0, 1000, 0.1) == BreakEven(NEVER)  # as many steps, more compute


def test_the_worked_answers_hold_at_and_around_the_break_even():
    mb_time = lambda c: 1200 * (0.05 + c)  # noqa: E731
    mf_time = lambda c: 1000 * (0.1 + c)  # noqa: E731
    assert mb_time(0.2) == pytest.approx(mf_time(0.2)) and mb_time(0.19) < mf_time(0.19) and mb_time(0.21) > mf_time(0.21)


@pytest.mark.parametrize("name", ["mb_steps", "mb_seconds_per_step", "mf_steps", "mf_seconds_per_step"])
@pytest.mark.parametrize("bad", [float("nan"), -1.0, float("inf")])
def test_bad_input_is_refused_with_its_name(name, bad):
    values = {"mb_steps": 1.0, "mb_seconds_per_step": 1.0, "mf_steps": 1.0, "mf_seconds_per_step": 1.0, name: bad}
    with pytest.raises(ValueError, match=f"^{name} must be"):
        break_even_step_cost(**values)


@given(st.integers(1, 10_000), st.floats(0, 10), st.integers(1, 10_000), st.floats(0, 10))
def test_the_answer_says_when_the_model_based_run_is_first(mb_steps, mb_s, mf_steps, mf_s):
    result = break_even_step_cost(mb_steps, mb_s, mf_steps, mf_s)
    mb_time = lambda c: mb_steps * (mb_s + c)  # noqa: E731
    mf_time = lambda c: mf_steps * (mf_s + c)  # noqa: E731
    costs = (0.0, 0.01, 1.0, 100.0)
    if result.when == ALWAYS:
        assert all(mb_time(c) <= mf_time(c) * (1 + 1e-9) for c in costs)
    elif result.when == NEVER:
        assert mb_time(0) > mf_time(0) and all(mb_time(c) >= mf_time(c) * (1 - 1e-9) for c in costs)
    else:
        x = result.seconds
        assert x >= 0 and mb_time(x) == pytest.approx(mf_time(x), rel=1e-6, abs=1e-6)
        # a step cost past the break-even (whole steps apart: at least a second apart in time there)
        beyond = 2 * x + 1
        assert (mb_time(beyond) < mf_time(beyond)) == (result.when == AT_LEAST)


def test_format():
    assert format_step_cost(0.015) == "15 ms"
    assert format_step_cost(0.25) == "0.25 s"


def test_the_report_text_of_each_answer():
    assert break_even_text(BreakEven(AT_LEAST, 0.125)) == "first in wall-clock too once a real step costs 0.12 s or more"
    assert break_even_text(BreakEven(AT_MOST, 0.2)).startswith(
        "first in wall-clock only while a real step costs 0.20 s or less")
    assert break_even_text(BreakEven(ALWAYS)) == "first in wall-clock too, whatever a real step costs"
    assert break_even_text(BreakEven(NEVER)).startswith("never first in wall-clock")


def test_one_saved_step_and_a_fraction_of_a_second_of_extra_compute_are_still_cases_of_their_own():
    # 999 steps at 0.2 s against 1,000 at 0.1 s: one step saved, 99.8 s more compute -> first from 99.8 s a step
    one_saved = break_even_step_cost(999, 0.2, 1000, 0.1)
    assert one_saved.when == AT_LEAST and one_saved.seconds == pytest.approx(99.8)
    # 500 steps at 0.201 s against 1,000 at 0.1 s: 0.5 s more compute over 500 saved steps -> 1 ms a step
    half_second = break_even_step_cost(500, 0.201, 1000, 0.1)
    assert half_second.when == AT_LEAST and half_second.seconds == pytest.approx(0.001)


def test_step_costs_switch_from_milliseconds_to_seconds_at_a_tenth_of_a_second():
    assert format_step_cost(0.09949) == "99 ms"  # 99.49 ms rounds down
    assert format_step_cost(0.1) == "0.10 s"
