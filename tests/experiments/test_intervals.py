"""Log-scale intervals of real steps to a target over seeds, and the paired per-seed ratio."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from experiments.reporting.intervals import (
    TOO_FEW,
    geometric_mean,
    interval_text,
    log_t_interval,
    paired_log_ratio,
)

# Student's t quantile with 2 degrees of freedom has a closed form: t_p = (2p - 1) / sqrt(2 p (1 - p)).
T_975_DF2 = 0.95 / math.sqrt(2 * 0.975 * 0.025)  # 4.302653
T_975_DF1 = math.tan(math.pi * 0.475)  # Cauchy: 12.706205


def test_three_seeds_by_hand():
    # logs are log 2000 - log 2, log 2000, log 2000 + log 2: mean log 2000, sample std log 2
    low, high = log_t_interval([1000, 2000, 4000])
    half = T_975_DF2 * math.log(2) / math.sqrt(3)
    assert T_975_DF2 == pytest.approx(4.303, abs=5e-4)
    assert low == pytest.approx(2000 * math.exp(-half), rel=1e-6)  # 357.4
    assert high == pytest.approx(2000 * math.exp(half), rel=1e-6)  # 11,191
    assert geometric_mean([1000, 2000, 4000]) == pytest.approx(2000)


def test_two_seeds_by_hand():
    # logs of 200 and 300: mean log sqrt(60000), sample std log(1.5) / sqrt(2), 1 degree of freedom
    low, high = log_t_interval([200, 300])
    half = T_975_DF1 * (math.log(1.5) / math.sqrt(2)) / math.sqrt(2)
    assert (low, high) == pytest.approx((math.sqrt(60000) * math.exp(-half), math.sqrt(60000) * math.exp(half)),
                                        rel=1e-6)  # 18.6 and 3,220
    assert low > 0  # the raw-scale t interval of the same seeds is 250 +- 635


def test_too_few_seeds_or_a_zero_give_no_interval():
    assert log_t_interval([500]) is None
    assert log_t_interval([]) is None
    assert log_t_interval([0, 100, 200]) is None
    assert interval_text(None) == TOO_FEW == "too few seeds to bound"
    assert interval_text((357.4, 11191.4)) == "[357, 11,191]"
    with pytest.raises(ValueError, match="> 0"):
        geometric_mean([0, 4])


def test_paired_ratio_by_hand():
    # per seed b / a = 2, 4, 8: geometric mean 4, logs log 4 -+ log 2, sample std log 2
    paired = paired_log_ratio([1000, 2000, 500], [2000, 8000, 4000])
    half = T_975_DF2 * math.log(2) / math.sqrt(3)
    assert paired.pairs == 3
    assert paired.ratio == pytest.approx(4.0)
    assert paired.interval == pytest.approx((4 * math.exp(-half), 4 * math.exp(half)), rel=1e-6)


def test_the_pairing_follows_the_seeds():
    # The ratio (a geometric mean of ratios is the ratio of geometric means) does not depend on the
    # pairing; its interval does. Seed by seed b is 3 times a, so the paired interval has no width,
    # where seeds paired the other way round (12, 3, 0.75) would spread over two orders of magnitude.
    paired = paired_log_ratio([1000, 2000, 4000], [3000, 6000, 12000])
    assert paired.ratio == pytest.approx(3.0)
    assert paired.interval == pytest.approx((3.0, 3.0))
    assert paired_log_ratio([4000, 2000, 1000], [3000, 6000, 12000]).ratio == pytest.approx(3.0)


def test_paired_ratio_of_one_seed_has_no_interval_and_bad_input_is_named():
    paired = paired_log_ratio([5000], [27000])
    assert paired.ratio == pytest.approx(5.4) and paired.interval is None and paired.pairs == 1
    with pytest.raises(ValueError, match="one value per seed"):
        paired_log_ratio([1, 2], [3])
    with pytest.raises(ValueError, match="> 0"):
        paired_log_ratio([0, 2], [3, 4])


counts = st.lists(st.floats(min_value=1, max_value=1e6), min_size=2, max_size=6)


@settings(deadline=None)  # the t quantile's first call per seed count integrates (~0.1 s)
@given(counts)
def test_count_bounds_are_positive_and_hold_the_geometric_mean(values):
    low, high = log_t_interval(values)
    centre = math.exp(sum(math.log(v) for v in values) / len(values))
    assert 0 < low <= centre * (1 + 1e-9) and centre <= high * (1 + 1e-9)


@settings(deadline=None)
@given(st.lists(st.tuples(st.floats(min_value=1, max_value=1e6), st.floats(min_value=1, max_value=1e6)),
                min_size=2, max_size=6))
def test_ratio_bounds_are_positive_and_hold_the_ratio(pairs):
    paired = paired_log_ratio([a for a, _ in pairs], [b for _, b in pairs])
    low, high = paired.interval
    assert 0 < low <= paired.ratio * (1 + 1e-9) and paired.ratio <= high * (1 + 1e-9)


def test_a_paired_ratio_needs_arms_of_equal_length_and_honours_its_level():
    with pytest.raises(ValueError):
        paired_log_ratio([1.0, 2.0], [2.0, 4.0, 8.0])
    # ratios 2, 4, 8: logs ln2 * (1, 2, 3), mean 2 ln2, sample sd ln2; a 90% interval uses the 0.95 quantile
    # of Student's t with 2 degrees of freedom, (2p - 1) / sqrt(2p(1 - p)) in closed form
    p = 0.95
    t = (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    half = t * math.log(2) / math.sqrt(3)
    low, high = paired_log_ratio([1.0, 1.0, 1.0], [2.0, 4.0, 8.0], level=0.90).interval
    assert low == pytest.approx(4 * math.exp(-half)) and high == pytest.approx(4 * math.exp(half))
