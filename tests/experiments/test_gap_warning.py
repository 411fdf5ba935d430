"""The run warns once when imagined returns stay away from real ones for several iterations."""

from __future__ import annotations

import logging
import math

import pytest

from experiments.gap_warning import GapWatch, gap_streak
from imagination.config import ImaginationConfig
from tests.experiments.in_process import train_in_process
from tests.experiments.test_determinism import BASE, MODEL_BASED

NAN = float("nan")


def test_the_streak_counts_absolute_gaps_beyond_the_bound_and_nan_breaks_it():
    assert gap_streak(0, 0.3, 0.25) == 1
    assert gap_streak(2, -0.3, 0.25) == 3  # imagined below real counts too
    assert gap_streak(2, 0.25, 0.25) == 0  # at the bound is not beyond it
    assert gap_streak(2, NAN, 0.25) == 0  # no imagination this iteration


def test_it_warns_at_the_third_iteration_in_a_row_and_only_once():
    watch = GapWatch(bound=0.25, iterations=3)
    # Streaks: 1, 2, 0 (0.1 is within), 1, 2, 3 -> warn at the 6th; later ones stay quiet.
    assert [watch.observe(g) for g in [0.3, 0.3, 0.1, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3]] == [
        False, False, False, False, False, True, False, False, False]


def test_a_nan_iteration_breaks_the_streak():
    watch = GapWatch(bound=0.25, iterations=3)
    assert not any(watch.observe(g) for g in [0.3, 0.3, NAN, 0.3, 0.3])  # streaks 1, 2, 0, 1, 2


def test_no_bound_never_warns():
    watch = GapWatch(bound=None, iterations=1)
    assert not any(watch.observe(g) for g in [5.0, -5.0, 5.0])


@pytest.mark.parametrize(("key", "value"), [("gap_warning", -0.1), ("gap_warning", math.nan),
                                            ("gap_warning_iterations", 0)])
def test_bad_settings_name_their_key(key, value):
    with pytest.raises(ValueError, match=f"imagination.{key} "):
        ImaginationConfig(**{key: value})


@pytest.mark.slow
def test_a_model_based_run_beyond_the_bound_warns_once(tmp_path, caplog):
    # Bound 0: any imagined iteration with a nonzero gap is beyond it; one such iteration is enough.
    overrides = [*BASE, "algo=grpo", *MODEL_BASED, "trainer.iterations=3", "imagination.gap_warning=0",
                 "imagination.gap_warning_iterations=1"]
    with caplog.at_level(logging.WARNING, logger="experiments.gap_warning"):
        train_in_process(overrides, tmp_path / "run")
    warnings = [r for r in caplog.records if r.name == "experiments.gap_warning"]
    assert len(warnings) == 1
    assert "imagination.gap_warning" in warnings[0].getMessage()
