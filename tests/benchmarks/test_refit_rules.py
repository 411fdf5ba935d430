"""benchmarks/refit_rules.py: an arm's row worked out by hand from made-up records, and the arms' overrides."""

from __future__ import annotations

import math

from benchmarks.refit_rules import ARMS, arm_summary, table
from imagination.config import ImaginationConfig


def record(iteration: int, steps: int, fit_cpu: float, **extra: float) -> dict:
    return {"iteration": iteration, "charts/real_env_steps": steps, "time/phase/wm_fit_cpu_s": fit_cpu,
            "time/phase/update_cpu_s": 1.0, "time/phase/wm_fit_wall_s": 2 * fit_cpu, "time/phase/update_wall_s": 3.0,
            **extra}


def test_an_arms_row_by_hand():
    records = [
        record(1, 100, 10.0, **{"wm/fit_trajectories": 8.0}),  # the first fit
        record(2, 100, 0.0, **{"wm/refit_skipped": 1.0}),
        record(3, 150, 2.0, **{"wm/fit_trajectories": 9.0, "wm/refit_skipped": 0.0, "wm/fit_steps_used": 15.0}),
    ]
    evaluations = [{"iteration": 0, "eval/success_rate": 0.25}, *records, {"iteration": 3, "eval/success_rate": 0.5}]
    row = arm_summary({"records": records, "all_records": evaluations})
    # CPU: fits 10 + 0 + 2 plus one update second per iteration = 15 s over 150 real steps;
    # wall: 20 + 0 + 4 fitting plus 3 s of update per iteration = 33 s
    assert row["real_steps"] == 150
    assert math.isclose(row["cpu_per_step"], 15 / 150) and math.isclose(row["wall_per_step"], 33 / 150)
    assert (row["fit_cpu_s"], row["refit_cpu_s"], row["refits"], row["skipped"]) == (12.0, 2.0, 2, 1.0)
    assert (row["fit_steps"], row["success"]) == (15.0, 0.5)
    assert "| 150 | 0.100 | 0.220 | 12.0 | 2.0 | 2 (1) | 15 | 0.500 |" in table({"x": row})


def test_without_early_stop_the_steps_read_as_a_dash():
    row = arm_summary({"records": [record(1, 10, 1.0, **{"wm/fit_trajectories": 4.0})], "all_records": []})
    assert math.isnan(row["fit_steps"]) and math.isnan(row["success"])
    assert "| - | nan |" in table({"today": row})


def test_every_arms_overrides_are_valid_keys():
    for overrides in ARMS.values():
        options = dict(override.removeprefix("imagination.").split("=") for override in overrides)
        ImaginationConfig(fit_loop="plain", **{k: float(v) if "." in v else int(v) for k, v in options.items()})
