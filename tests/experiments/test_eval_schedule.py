"""The real-step evaluation schedule and the report's rule for real steps to a target, on hand-worked
curves: marks crossed by an iteration, the mark grid, the held crossing, the t interval."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from experiments.eval_schedule import evaluation_due, mark_metrics, marks_crossed
from experiments.reporting.curves import (
    held_target_bound,
    mark_curve,
    steps_to_held_target,
    steps_to_target,
    t_interval,
    t_quantile,
)


def test_an_iteration_reaches_the_marks_between_its_step_counts():
    assert marks_crossed(0, 99, 100) == []
    assert marks_crossed(0, 100, 100) == [100]  # reaching a mark exactly counts
    assert marks_crossed(100, 199, 100) == []  # 100 was reached by the iteration before
    assert marks_crossed(180, 420, 100) == [200, 300, 400]  # several at once: one evaluation stands for three
    assert marks_crossed(50, 50, 100) == []  # an iteration without real steps (fully imagined)
    with pytest.raises(ValueError, match="eval_every_steps"):
        marks_crossed(0, 10, 0)


def test_evaluation_due_on_steps_ignores_iterations_and_on_iterations_ignores_steps():
    on_steps = dict(last_iteration=50, eval_every=5, eval_every_steps=300)
    assert evaluation_due(5, **on_steps, steps_before=0, steps_after=290) == (False, [])
    assert evaluation_due(7, **on_steps, steps_before=290, steps_after=610) == (True, [300, 600])
    assert evaluation_due(50, **on_steps, steps_before=610, steps_after=620) == (True, [])  # the last iteration
    on_iterations = dict(last_iteration=50, eval_every=5, eval_every_steps=None)
    assert evaluation_due(5, **on_iterations, steps_before=0, steps_after=10) == (True, [])
    assert evaluation_due(6, **on_iterations, steps_before=0, steps_after=10_000) == (False, [])
    assert mark_metrics([300, 600]) == {"eval/mark": 600.0, "eval/marks": 2.0} and mark_metrics([]) == {}


def test_the_mark_grid_reads_the_first_evaluation_at_or_after_each_mark():
    curve = [(0, 0.1), (250, 0.5), (420, 0.9), (430, 0.2)]
    # mark 100 and 200 -> the evaluation at 250; 300 and 400 -> the one at 420; nothing past 430.
    assert mark_curve(curve, 100) == [(0, 0.1), (100, 0.5), (200, 0.5), (300, 0.9), (400, 0.9)]
    assert mark_curve([], 100) == []
    with pytest.raises(ValueError):
        mark_curve(curve, 0)


def test_a_single_noisy_spike_counted_under_first_crossing_but_not_under_the_held_rule():
    # Evaluated every 100 real steps: one spike to 0.85 at 200, then back below; it truly gets there at 500.
    curve = [(0, 0.5), (100, 0.6), (200, 0.85), (300, 0.7), (400, 0.75), (500, 0.82), (600, 0.84), (700, 0.86),
             (800, 0.9)]
    assert steps_to_target(curve, 0.8) == 200  # the old rule takes the spike
    assert steps_to_held_target(curve, 0.8) == 500  # 500, 600, 700 are all >= 0.8
    assert steps_to_held_target(mark_curve(curve, 100), 0.8) == 500
    # A crossing in the run's last two marks is unconfirmed: it does not count.
    assert steps_to_held_target(curve[:7], 0.8) is None
    assert steps_to_held_target(curve, 0.8, hold=0) == 200  # with no hold it is the first crossing


def test_more_frequent_looks_give_no_earlier_answer_on_the_mark_grid():
    # The same noisy run looked at every 10 steps (spikes at 50 and 130) and every 100 steps: the first
    # crossing rewards the frequent looks, the mark grid reads both the same.
    dense = [(10 * i, 0.9 if i in (5, 13) else (0.6 if i < 30 else 0.85)) for i in range(61)]
    sparse = [(x, v) for x, v in dense if x % 100 == 0]
    assert steps_to_target(dense, 0.8) == 50 and steps_to_target(sparse, 0.8) == 300
    assert mark_curve(dense, 100) == mark_curve(sparse, 100)
    assert steps_to_held_target(mark_curve(dense, 100), 0.8) == steps_to_held_target(sparse, 0.8) == 300


def test_a_run_that_never_held_the_target_is_bounded_by_its_last_checkable_mark():
    points = [(0, 0.5), (100, 0.6), (200, 0.7), (300, 0.9), (400, 0.9)]
    # 300 and 400 are the last two marks: a crossing at 300 needs 500 too, so 300 is the earliest it could be.
    assert steps_to_held_target(points, 0.8) is None and held_target_bound(points, 0.8) == 300
    assert held_target_bound([*points, (500, 0.85)], 0.8) is None  # it held from 300: no bound, a value
    assert held_target_bound(points[:1], 0.8) == 0 and held_target_bound([], 0.8) is None


@given(st.lists(st.floats(0, 1), min_size=1, max_size=12), st.lists(st.floats(0, 1), max_size=12),
       st.floats(0.05, 0.95))
def test_no_continuation_of_a_run_holds_the_target_before_its_bound(values, more, target):
    points = [(100 * i, v) for i, v in enumerate(values)]
    bound = held_target_bound(points, target)
    if bound is None:
        return  # it held the target already
    longer = [(100 * i, v) for i, v in enumerate(values + more)]
    crossing = steps_to_held_target(longer, target)
    assert crossing is None or crossing >= bound


def test_t_quantiles_against_closed_forms_and_the_table():
    # df = 1 is the Cauchy: tan(pi * (p - 1/2)); df = 2: (2p - 1) / sqrt(2 p (1 - p)).
    assert t_quantile(0.975, 1) == pytest.approx(math.tan(math.pi * 0.475), rel=1e-6)
    assert t_quantile(0.975, 2) == pytest.approx(0.95 / math.sqrt(2 * 0.975 * 0.025), rel=1e-6)
    assert t_quantile(0.975, 4) == pytest.approx(2.776445, rel=1e-5)  # printed t tables
    assert t_quantile(0.5, 3) == pytest.approx(0.0, abs=1e-9)


def test_t_interval_of_three_seeds_by_hand():
    # mean 1000, sample std 100, t(0.975, 2) = 4.302653: 1000 +- 4.302653 * 100 / sqrt(3) = +- 248.41
    low, high = t_interval([900, 1000, 1100])
    assert (low, high) == pytest.approx((1000 - 248.414, 1000 + 248.414), abs=0.01)
    assert t_interval([500]) is None


def test_report_md_shows_each_runs_ledger_and_full_overrides_and_the_mark_grid(tmp_path):
    import json as _json

    from experiments.report import write_report

    ledger = {"real_env_steps": 900, "warm_start_expert_steps": 1234, "world_model_real_steps": 870,
              "world_model_expert_steps": 0, "critic_real_steps": 0, "eval_env_steps": 2560, "evaluations": 4}
    for name, curve in {"mb": [(0, 0.5), (300, 0.85), (600, 0.9), (900, 0.9)],
                        "mf": [(0, 0.5), (300, 0.6), (600, 0.85), (900, 0.7)]}.items():
        folder = tmp_path / "runs" / f"method={name},seed=0"
        (folder / ".hydra").mkdir(parents=True)
        (folder / ".hydra" / "overrides.yaml").write_text(f"- algo=grpo\n- imagination.ratio={0.9 if name == 'mb' else 0}\n"
                                                          "- seed=0\n")
        (folder / "config.yaml").write_text("trainer:\n  eval_every_steps: 300\n")
        (folder / "metrics.jsonl").write_text("".join(
            _json.dumps({"iteration": i, "charts/real_env_steps": x, "eval/success_rate": v}) + "\n"
            for i, (x, v) in enumerate(curve)))
        (folder / "summary.json").write_text(_json.dumps({"final_success": curve[-1][1], "ledger": ledger}))
        (folder / "done").write_text("")
    _, md = write_report(tmp_path / "runs", tmp_path / "out", 0.8,
                         names=lambda run: run.path.name.split(",")[0].split("=")[1])
    text = md.read_text()
    assert "marks every 300 real env steps" in text
    rows: dict[str, str] = {}
    for line in text.splitlines():  # the summary table's rows: the first line naming each configuration
        if line.startswith("| m"):
            rows.setdefault(line.split("|")[1].strip(), line)
    assert "| 300 " in rows["mb"]  # 300, 600, 900 all >= 0.8
    assert "not reached (0/1)" in rows["mf"]  # the 0.85 at 600 falls back to 0.7: not held
    assert "| 1,234 " in text and "| 2,560 " in text and "| 870 " in text  # the ledger's entries
    assert "algo=grpo imagination.ratio=0.9" in text  # the full overrides, beside the short name
