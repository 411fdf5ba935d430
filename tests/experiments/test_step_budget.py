"""A real-step budget stops collection where it is reached, not after the whole iteration."""

from __future__ import annotations

import json

import pytest

from experiments.step_budget import may_reach_budget, rank_step_budget
from tests.experiments.in_process import train_in_process
from tests.experiments.test_determinism import BASE
from tests.experiments.test_train_e2e import read_records


def test_an_iteration_may_reach_the_budget_only_when_its_most_steps_would():
    assert not may_reach_budget(16, None, 4, 4)  # no budget
    assert not may_reach_budget(0, 22, 4, 4)  # 0 + 4 * 4 = 16 < 22
    assert may_reach_budget(16, 22, 4, 4)  # 16 + 16 = 32 >= 22
    assert may_reach_budget(6, 22, 4, 4)  # 6 + 16 = 22 exactly


def test_the_steps_left_are_split_like_the_groups():
    assert [rank_step_budget(7, 3, r) for r in range(3)] == [2, 2, 3]  # 7 // 3 = 2, the rest to the last
    assert [rank_step_budget(6, 1, r) for r in range(1)] == [6]


@pytest.mark.slow
def test_the_budget_stops_collection_mid_iteration(tmp_path):
    # Every episode is one turn (max_turns=1), so a group of 4 is 4 steps and an iteration of 4 groups 16.
    # Iteration 1: 16 steps (16 + 16 = 32 could pass 22, but 0 + 16 could not: played at once).
    # Iteration 2: 6 steps left; group 1 -> 4 (< 6), group 2 -> 8 (>= 6), groups 3-4 not started: 24 in all.
    run_dir = tmp_path / "run"
    overrides = [*BASE, "algo=grpo", "trainer.iterations=5", "trainer.groups_per_iteration=4",
                 "trainer.group_size=4", "trainer.max_turns=1", "trainer.max_env_steps=22"]
    summary = train_in_process(overrides, run_dir)
    assert summary["real_env_steps"] == 24 <= 22 + 4  # the budget plus at most one group's steps
    assert summary["iterations"] == 2
    iterations = [r for r in read_records(run_dir) if "time/collect_s" in r]
    assert [r["charts/real_env_steps"] for r in iterations] == [16, 24]
    assert "charts/budget_cut" not in iterations[0] and iterations[1]["charts/budget_cut"] == 1
    entry = {"iteration": 2, "max_env_steps": 22, "real_env_steps": 24, "groups_planned": 4, "groups_played": 2}
    assert summary["budget_cut"] == entry
    assert json.loads((run_dir / "summary.json").read_text())["budget_cut"] == entry


@pytest.mark.slow
def test_dynamic_sampling_starts_no_resampling_round_past_the_budget(tmp_path):
    # As above, but dropped groups may be resampled (up to 3 more rounds of 4 groups): iteration 1 could
    # play 4 * 4 groups of 4 steps = 64 >= 22, so it already plays group by group and stops at 24 steps
    # (the 6th group, 20 -> 24), or earlier at 16 if the first round kept 4 informative groups.
    run_dir = tmp_path / "run"
    overrides = [*BASE, "algo=grpo", "algo.dynamic_sampling=true", "algo.max_resample_rounds=3",
                 "trainer.iterations=5", "trainer.groups_per_iteration=4", "trainer.group_size=4",
                 "trainer.max_turns=1", "trainer.max_env_steps=22"]
    summary = train_in_process(overrides, run_dir)
    assert 22 <= summary["real_env_steps"] <= 22 + 4
    assert summary["budget_cut"]["real_env_steps"] == summary["real_env_steps"]
