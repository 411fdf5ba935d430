"""A run at a success threshold (experiments/reporting/thresholds.py): the evaluation a mark is read at,
CPU seconds to it, steps with the warm start counted, and two arms paired by seed."""

from pathlib import Path

import pytest

from experiments.reporting.runs import Run
from experiments.reporting.thresholds import (
    AtThreshold,
    at_threshold,
    counted_steps,
    cpu_at_steps,
    eval_steps_at,
    seed_pairs,
)

CURVE = [(0, 0.2), (1003, 0.5), (2004, 0.7), (3001, 0.75), (4002, 0.8), (5000, 0.9)]
LEDGER = {"real_env_steps": 5000, "warm_start_expert_steps": 100, "warm_start_check_steps": 50}


def test_a_mark_is_read_at_the_first_evaluation_at_or_after_it():
    assert eval_steps_at(CURVE, 0) == 0
    assert eval_steps_at(CURVE, 1000) == 1003
    assert eval_steps_at(CURVE, 1003) == 1003
    assert eval_steps_at(CURVE, 4003) == 5000
    assert eval_steps_at(CURVE, 5001) is None
    assert eval_steps_at([], 0) is None


def test_cpu_to_a_step_count_is_linear_in_real_steps():
    assert cpu_at_steps(600.0, 30_000, 10_000) == pytest.approx(200.0)  # a third of the steps, a third of 600 s
    assert cpu_at_steps(600.0, 30_000, 30_000) == pytest.approx(600.0)
    assert cpu_at_steps(600.0, 30_000, 0) == 0.0
    assert cpu_at_steps(None, 30_000, 10_000) is None  # an older run without its CPU time
    assert cpu_at_steps(600.0, None, 10_000) is None
    assert cpu_at_steps(600.0, 0, 0) is None
    assert cpu_at_steps(600.0, 30_000, None) is None
    with pytest.raises(ValueError, match="outside"):
        cpu_at_steps(600.0, 30_000, 30_001)


def test_counted_steps_add_the_warm_starts_expert_and_check_steps():
    assert counted_steps(5_000, {"warm_start_expert_steps": 774, "warm_start_check_steps": 2_888}) == 8_662
    assert counted_steps(0, {"warm_start_expert_steps": 774, "warm_start_check_steps": 2_888}) == 3_662
    assert counted_steps(None, LEDGER) is None  # never held
    assert counted_steps(5_000, {"warm_start_expert_steps": 774, "warm_start_check_steps": None}) is None
    assert counted_steps(5_000, {"warm_start_check_steps": 2_888}) is None
    assert counted_steps(5_000, {}) is None


def make_run(seed=0, cpu_s=500.0, ledger=LEDGER) -> Run:
    return Run(path=Path(f"s{seed}"), overrides={}, seed=seed, env="e", status="done", curve=CURVE,
               final_success=0.9, wall_s=900.0, real_env_steps=5000, cpu_s=cpu_s, ledger=dict(ledger))


def test_a_run_at_a_threshold_by_hand():
    # Marks 1000 apart read 0.2, 0.5, 0.7, 0.75, 0.8, 0.9 (at evaluations 0, 1003, 2004, 3001, 4002, 5000).
    # 0.7: held from mark 2000 (0.7, 0.75, 0.8), read at 2004: CPU 500 * 2004 / 5000 = 200.4 s; counted 2000 + 150.
    assert at_threshold(make_run(), 0.7, 1000) == AtThreshold(2000, pytest.approx(200.4), 2150)
    # 0.75: from mark 3000 (0.75, 0.8, 0.9), read at 3001: 300.1 s; counted 3150.
    assert at_threshold(make_run(), 0.75, 1000) == AtThreshold(3000, pytest.approx(300.1), 3150)
    # 0.8 crosses at 4000 with one mark after it: not held.
    assert at_threshold(make_run(), 0.8, 1000) == AtThreshold(None, None, None)
    assert at_threshold(make_run(cpu_s=None, ledger={}), 0.7, 1000) == AtThreshold(2000, None, None)


def test_arms_pair_by_seed_not_by_position():
    # Seed 1 did not hold it under a; seed 3 ran only under b; the dicts list their seeds in other orders.
    pairs = seed_pairs({2: 10.0, 0: 5.0, 1: None}, {0: 20.0, 1: 40.0, 2: 30.0, 3: 7.0})
    assert (pairs.seeds, pairs.a, pairs.b, pairs.total) == ([0, 2], [5.0, 10.0], [20.0, 30.0], 3)
    assert pairs.ratios == [4.0, 3.0]
    assert seed_pairs({0: 0.0, 1: 2.0}, {0: 5.0, 1: 4.0}).ratios == [2.0]  # a seed at 0 steps has no ratio
    # The second arm's misses count as the first's do (None: not held, 0: no ratio); one step is a value.
    edges = seed_pairs({0: 1.0, 1: 3.0, 2: 4.0}, {0: 1.0, 1: None, 2: 0.0})
    assert (edges.seeds, edges.a, edges.b, edges.total) == ([0], [1.0], [1.0], 3)
    none = seed_pairs({None: 5.0}, {None: 10.0})  # a run whose seed is unknown pairs with nothing
    assert (none.seeds, none.total) == ([], 0)
