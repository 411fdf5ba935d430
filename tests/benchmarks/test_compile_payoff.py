"""What compiling the update pays back: ``break_even`` and ``Timing`` against hand-worked figures."""

import pytest

from benchmarks.compile_payoff import Timing, break_even


def test_break_even_is_the_compile_time_over_the_saving_per_call():
    assert break_even(60.0, 2.0, 1.5) == pytest.approx(120.0)  # 60 s / 0.5 s saved per update
    assert break_even(10.0, 1.0, 1.0) == float("inf")  # no saving: never paid back
    assert break_even(10.0, 1.0, 1.2) == float("inf")  # slower compiled: never paid back


def test_timing_divides_each_pass_by_its_calls_and_pairs_the_repeats():
    # Passes of 3 updates: eager 6, 9, 7.5 s (2, 3, 2.5 s per update), compiled 3, 6, 5 s (1, 2, 5/3 s).
    timing = Timing(calls=3, compile_s=30.0, eager_s=[6.0, 9.0, 7.5], compiled_s=[3.0, 6.0, 5.0])

    assert timing.per_call("eager") == pytest.approx((2.5, 2.0))
    assert timing.per_call("compiled") == pytest.approx((5 / 3, 1.0))
    assert timing.speedups() == pytest.approx((1.5, 1.5))  # per repeat 2, 1.5, 1.5
    assert timing.break_even() == pytest.approx(36.0)  # 30 s / (2.5 - 5/3) s saved per update
