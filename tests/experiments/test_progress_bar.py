"""The training loop's progress bar: real env steps against a real-step budget, iterations otherwise."""

from __future__ import annotations

from experiments.progress_bar import BarPlan, LoopBar, bar_advance, bar_plan


def test_a_step_budget_is_the_total_and_the_unit_is_real_steps():
    # experiment=quick: a cap of 1,000 iterations, a budget of 3,000 real env steps.
    assert bar_plan(1000, 3000, first_iteration=1, real_env_steps=0) == BarPlan(total=3000, initial=0, unit="step")


def test_without_a_budget_the_bar_counts_iterations():
    assert bar_plan(40, None, first_iteration=1, real_env_steps=0) == BarPlan(total=40, initial=0, unit="it")


def test_a_resumed_run_starts_where_it_stopped():
    # After iteration 7 with 1,234 real steps: the step bar at 1,234, the iteration bar at 7.
    assert bar_plan(1000, 3000, first_iteration=8, real_env_steps=1234).initial == 1234
    assert bar_plan(40, None, first_iteration=8, real_env_steps=1234).initial == 7


def test_the_step_bar_advances_by_the_real_steps_collected():
    plan = bar_plan(1000, 3000, first_iteration=1, real_env_steps=0)
    assert bar_advance(plan, 0, 317) == 317
    assert bar_advance(plan, 317, 338) == 21
    assert bar_advance(plan, 338, 338) == 0  # an iteration that collected nothing (all imagined)


def test_the_last_group_overshooting_the_budget_ends_the_bar_at_its_total():
    plan = bar_plan(1000, 3000, first_iteration=1, real_env_steps=0)
    assert bar_advance(plan, 2980, 3003) == 20  # 3,003 collected: the bar stops at 3,000


def test_the_iteration_bar_advances_by_one_whatever_the_steps():
    plan = bar_plan(40, None, first_iteration=1, real_env_steps=0)
    assert bar_advance(plan, 0, 317) == 1
    assert bar_advance(plan, 317, 317) == 1


def test_the_loop_bar_counts_a_budgeted_run_to_its_budget(capsys):
    # Enabled (a disabled tqdm bar counts nothing); its drawing goes to the captured stderr.
    # Iterations of 317, 21 and 2,665 real steps (the last over the budget): 3,000 of 3,000 at the end.
    bar = LoopBar("run", bar_plan(1000, 3000, 1, 0), real_env_steps=0, enabled=True)
    for steps in (317, 338, 3003):
        bar.advance(steps)
    assert (bar.bar.n, bar.bar.total) == (3000, 3000)
    bar.close()
    assert "3000/3000" in capsys.readouterr().err


def test_the_loop_bar_counts_iterations_without_a_budget(capsys):
    bar = LoopBar("run", bar_plan(40, None, 1, 0), real_env_steps=0, enabled=True)
    for steps in (317, 338, 3003):
        bar.advance(steps)
    assert (bar.bar.n, bar.bar.total) == (3, 40)
    bar.close()
