"""The profile's arithmetic on hand-written iteration records."""

import pytest

from benchmarks.profile_iteration import iteration_records, per_real_step, phase_totals

# metrics.jsonl as the loop writes it: the evaluation before the loop, then one record per iteration.
RECORDS = [
    {"iteration": 0, "charts/real_env_steps": 0, "eval/success_rate": 0.1},
    {"iteration": 1, "charts/real_env_steps": 200, "time/collect_s": 1.0,
     "time/phase/wm_fit_cpu_s": 10.0, "time/phase/update_cpu_s": 0.5, "time/phase/eval_cpu_s": 0.5},
    {"iteration": 2, "charts/real_env_steps": 220, "time/collect_s": 1.0,
     "time/phase/wm_fit_cpu_s": 1.0, "time/phase/update_cpu_s": 0.2},
    {"iteration": 3, "charts/real_env_steps": 250, "time/collect_s": 1.0,
     "time/phase/update_cpu_s": 0.3, "time/phase/eval_cpu_s": 0.1},
]


def test_each_iteration_gets_the_real_steps_it_took():
    rows = iteration_records(RECORDS)
    assert [(r["iteration"], r["real_steps"]) for r in rows] == [(1, 200), (2, 20), (3, 30)]


def test_seconds_per_real_step_with_and_without_evaluation():
    steady = iteration_records(RECORDS)[1:]
    assert phase_totals(steady, "cpu")["update"] == pytest.approx(0.5)
    # iterations 2-3: 1.0 + 0.2 + 0.3 + 0.1 = 1.6 s over 50 real steps; without the evaluation 1.5 s.
    assert per_real_step(steady, "cpu", with_eval=True) == pytest.approx(1.6 / 50)
    assert per_real_step(steady, "cpu", with_eval=False) == pytest.approx(1.5 / 50)
