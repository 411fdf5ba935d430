"""The three-env headline sweep (benchmarks/headline.py): its plans, budgets and table."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import headline, sample_efficiency
from benchmarks.controls import CONTROLS
from benchmarks.headline import ARMS, EXTRA_ENVS, HEADLINE_ENVS, PLANS, EnvPlan, arm_budget
from experiments.reporting import load_runs
from tests.benchmarks.benchmark_runs import write_benchmark_run


def test_every_plan_is_a_preset_the_benchmark_runs_and_compares_at_the_model_based_budget():
    for env, plan in PLANS.items():
        assert env in sample_efficiency.ENVS + sample_efficiency.OTHER_ENVS
        assert plan.model_based_steps in plan.compare_at and plan.model_based_steps <= plan.model_free_steps
    with pytest.raises(ValueError, match="must hold the model-based budget"):
        EnvPlan(100, 50, (25, 100))


def test_the_headline_runs_three_planned_envs_and_its_extra_row_by_default():
    assert len(HEADLINE_ENVS) == 3 and set(HEADLINE_ENVS) | set(EXTRA_ENVS) <= set(PLANS)
    assert headline.build_parser().parse_args([]).envs == [*HEADLINE_ENVS, *EXTRA_ENVS]
    assert [*HEADLINE_ENVS, *EXTRA_ENVS] == list(sample_efficiency.ENVS)  # the benchmark's default sweep


def test_the_third_env_is_the_lookup_tool_task_and_the_extra_row_hidden_number_over_1_to_10():
    run = sample_efficiency.compose_run(["experiment=lookup"])
    assert run.env.name == "gym_text" and run.env.kwargs["entry_point"] == "envs.lookup_text:LookupText"
    assert run.trainer.eval_every_steps == 2000
    run = sample_efficiency.compose_run(["experiment=hidden_number_10"])
    assert run.env.name == "hidden_number" and (run.env.kwargs["n"], run.env.kwargs["max_turns"]) == (10, 4)
    assert run.trainer.eval_every_steps == 1000


def test_the_arms_are_every_model_free_method_and_control_and_the_reference():
    assert ARMS["model_based"] == (sample_efficiency.REFERENCE,)
    assert set(CONTROLS) <= set(ARMS["model_free"])
    assert not any(sample_efficiency.is_model_based(method) for method in ARMS["model_free"])
    plan = PLANS["hidden_number"]
    assert arm_budget(plan, sample_efficiency.REFERENCE) == plan.model_based_steps
    assert {arm_budget(plan, method) for method in ARMS["model_free"]} == {plan.model_free_steps}


@pytest.fixture
def hidden_number_sweep(tmp_path) -> Path:
    env_dir = tmp_path / "hidden_number"
    # Held crossings by hand (marks 10k apart, the crossing mark and the next two at >= 0.8):
    # the reference 10k on both seeds; grpo_reuse 40k and 60k; grpo never.
    def run(method, values, **kwargs):
        write_benchmark_run(env_dir, method, values, every=10_000, **kwargs)

    run("mb_grpo_r0.9", [0.3, 0.85, 0.9, 0.9], seed=0, cpu_s=3600)
    run("mb_grpo_r0.9", [0.3, 0.8, 0.8, 0.9], seed=1, cpu_s=5400)
    run("grpo_reuse", [0.3, 0.4, 0.5, 0.6, 0.85, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9], seed=0, cpu_s=1200)
    run("grpo_reuse", [0.3, 0.4, 0.5, 0.6, 0.7, 0.7, 0.8, 0.8, 0.9, 0.9, 0.8], seed=1, cpu_s=1200)
    run("grpo", [0.3, 0.4, 0.5, 0.5, 0.6, 0.6, 0.7, 0.7, 0.7, 0.7, 0.7], seed=0, cpu_s=600)
    return env_dir


# Paired by seed: 40k / 10k = 4 and 60k / 10k = 6, geometric mean sqrt(24) = 4.90, 95% interval
# 4.90 * exp(-+ 2.576) = 0.37 and 64.4 (the same log spread as grpo_reuse's steps).
RATIO = "4.9x fewer [0.4, 64.4]"


def test_the_table_sets_the_best_of_each_side_at_the_same_budgets(hidden_number_sweep):
    mb, mf, rows = headline.headline_rows(load_runs(hidden_number_sweep), PLANS["hidden_number"])
    assert (mb.label, mf.label) == ("mb_grpo_r0.9", "grpo_reuse") and len(rows) == 3
    table = headline.headline_table(mb, mf, PLANS["hidden_number"]).splitlines()
    assert table[0] == ("| arm | budget | real steps to 0.8 | success at 10,000 | success at 20,000 | "
                        "success at 30,000 (equal budget) | success at 100,000 | CPU time per run | seeds |")
    # Reference: 10k on both seeds; success 0.85 and 0.8 at 10k, 0.9 and 0.8 at 20k, 0.9 at 30k; 100k not spent.
    assert table[2] == ("| mb_grpo_r0.9 | 30,000 | 10,000 [10,000, 10,000] | 0.82 ± 0.04 | 0.85 ± 0.07 | "
                               "0.90 ± 0.00 | - | 75.0 ± 21.2 min | 2 |")
    # grpo_reuse: 40k and 60k, on the log scale: geometric mean sqrt(40k * 60k) = 48,990, interval
    # 48,990 * exp(-+ 12.706 * (log 1.5 / sqrt 2) / sqrt 2) = 48,990 * exp(-+ 2.576): 3,727 and 643,919
    # (the t interval of the raw mean was 50k +- 127k, from -77,062).
    assert table[3] == ("| grpo_reuse | 100,000 | 48,990 [3,727, 643,919] | 0.40 ± 0.00 | 0.50 ± 0.00 | "
                               "0.60 ± 0.00 | 0.85 ± 0.07 | 20.0 ± 0.0 min | 2 |")


def test_report_only_writes_each_envs_headline_and_runs_nothing(hidden_number_sweep, monkeypatch, capsys):
    def no_run(*args, **kwargs):
        raise AssertionError("--report-only ran something")

    monkeypatch.setattr(sample_efficiency.subprocess, "call", no_run)
    headline.main(["--out", str(hidden_number_sweep.parent), "--report-only", "--envs", "hidden_number", "sokoban"])
    text = (hidden_number_sweep / "headline.md").read_text()
    assert "headline: mb_grpo_r0.9 10,000 [10,000, 10,000] against grpo_reuse" in text and RATIO in text
    # the thresholds table: at 0.8 the same arms and ratio as the line (the CPU and ledger rows unrecorded here)
    assert "| 0.8 | mb_grpo_r0.9 | grpo_reuse | 10,000 [10,000, 10,000] |" in text and "| 4.9x [0.4, 64.4] | 4.0, 6.0 |" in text
    assert (hidden_number_sweep / "headline.png").exists() and (hidden_number_sweep / "sample_efficiency.md").exists()
    assert "## sokoban: no runs yet" in capsys.readouterr().out


def test_each_arm_runs_with_its_own_budget(tmp_path, monkeypatch):
    commands = []
    monkeypatch.setattr(sample_efficiency.subprocess, "call", lambda command, **kwargs: commands.append(command) or 0)
    monkeypatch.setattr(headline, "write_report", lambda *args, **kwargs: None)
    headline.main(["--out", str(tmp_path), "--envs", "frozen_lake", "--seeds", "0", "--jobs", "1"])
    budgets = {}
    for command in commands:
        method = next(part for part in command if part.startswith("hydra.run.dir=")).split("method=")[1].split(",")[0]
        budgets[method] = next(part for part in command if part.startswith("trainer.max_env_steps="))
    plan = PLANS["frozen_lake"]
    assert set(budgets) == {*ARMS["model_based"], *ARMS["model_free"]}
    assert budgets.pop(sample_efficiency.REFERENCE) == f"trainer.max_env_steps={plan.model_based_steps}"
    assert set(budgets.values()) == {f"trainer.max_env_steps={plan.model_free_steps}"}


@pytest.mark.slow
def test_the_command_reports_a_sweep(hidden_number_sweep):
    """``python -m`` on a finished sweep, as a researcher runs it between sessions of the sweep."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", "benchmarks.headline", "--report-only", "--envs",
                           "hidden_number", "--out", str(hidden_number_sweep.parent)],
                          cwd=repo, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| mb_grpo_r0.9 | 30,000 | 10,000 [10,000, 10,000] |" in done.stdout and RATIO in done.stdout


def test_keep_writes_the_tables_from_the_kept_records_alone(hidden_number_sweep, tmp_path, monkeypatch):
    monkeypatch.setattr(sample_efficiency.subprocess, "call", lambda *args, **kwargs: 1 / 0)
    keep = tmp_path / "kept"
    headline.main(["--out", str(hidden_number_sweep.parent), "--report-only", "--envs", "hidden_number",
                   "--keep", str(keep)])
    direct = (hidden_number_sweep / "headline.md")
    assert not direct.exists()  # the tables went beside the records, not into the sweep
    text = (keep / "hidden_number" / "headline.md").read_text()
    assert "headline: mb_grpo_r0.9 10,000 [10,000, 10,000] against grpo_reuse" in text and RATIO in text
    assert len(list((keep / "hidden_number").glob("method=*/metrics.jsonl"))) == 5
