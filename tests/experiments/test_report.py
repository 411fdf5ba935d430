"""The run report on hand-made run folders: statistics against hand-worked values, seed grouping and
labels, table order, the PNG and Markdown files, and the command line."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from experiments import report
from experiments.reporting import (
    configuration_labels,
    configurations,
    format_table,
    load_runs,
    mean_and_std,
    mean_curve,
    run_table,
    steps_to_target,
    summary_rows,
    value_at,
    value_at_budget,
)
from experiments.reporting.plot import figure_panels, panel_curves, panel_series
from experiments.reporting.table import format_duration

ROOT = Path(__file__).resolve().parents[2]
ENV = "hidden_number"  # make_run's env: every label starts with it


def make_run(folder: Path, overrides: list[str] | None, curve: list[tuple[int, float]], *, status: str = "done",
             seed: int | None = None, env: str = "hidden_number", wall_s: float | None = 60.0,
             summary: bool = True, series: dict[str, list[tuple[int, float]]] | None = None,
             cpu_s: float | None = None, ledger: dict | None = None) -> Path:
    """A run folder as ``experiments/train.py`` leaves it: one record per evaluation (plus the training
    series at their own steps), Hydra's overrides, the summary and a marker."""
    folder.mkdir(parents=True)
    if overrides is not None:
        (folder / ".hydra").mkdir()
        (folder / ".hydra" / "overrides.yaml").write_text("".join(f"- {item}\n" for item in overrides))
    records = {}
    for i, (steps, success) in enumerate(curve):
        records[steps] = {"iteration": i, "charts/real_env_steps": steps, "eval/success_rate": success,
                          "charts/elapsed_s": 10.0 * i}
    for name, points in (series or {}).items():
        for steps, value in points:
            records.setdefault(steps, {"iteration": len(records), "charts/real_env_steps": steps})[name] = value
    with (folder / "metrics.jsonl").open("w") as handle:
        for steps in sorted(records):
            handle.write(json.dumps(records[steps]) + "\n")
    if summary:
        (folder / "summary.json").write_text(json.dumps({
            "env": env, "algo": "grpo", "seed": seed if seed is not None else 0, "real_env_steps": curve[-1][0],
            "final_success": curve[-1][1], "wall_s": wall_s,
            **({} if cpu_s is None else {"cpu_seconds": cpu_s}),  # a run from before it was recorded has none
            **({} if ledger is None else {"ledger": ledger}),
        }))
    if status == "done":
        (folder / "done").write_text("{}")
    elif status == "failed":
        (folder / "failed").write_text("Traceback: boom")
    return folder


def make_sweep(root: Path) -> Path:
    """Two configurations differing in algo and imagination.ratio, with a shared key; grpo has three
    seeds evaluated at different step counts (the third stops before it can hold 0.8 for two more
    evaluations), gigpo two seeds, one of which never reaches 0.8, and a third seed that failed."""
    common = ["trainer.iterations=50", "env=hidden_number"]
    grpo = ["algo=grpo", "imagination.ratio=0.75"]
    gigpo = ["algo=gigpo", "imagination.ratio=0"]
    make_run(root / "a" / "0", [*common, *grpo, "seed=0"], [(0, 0.1), (100, 0.5), (200, 0.8), (300, 0.9), (400, 0.9)], seed=0,
             wall_s=100.0, series={"wm/one_step_exact_match": [(50, 0.2), (150, 0.6)],
                                   "imagination/return_gap": [(50, 0.5), (150, 0.1)]})
    make_run(root / "a" / "1", [*common, *grpo, "seed=1"], [(0, 0.2), (150, 0.85), (300, 0.95), (450, 0.95)], seed=1,
             wall_s=200.0)
    make_run(root / "a" / "2", [*common, *grpo, "seed=2"], [(0, 0.1), (120, 0.7), (240, 0.82)], seed=2, wall_s=150.0)
    make_run(root / "b" / "0", [*common, *gigpo, "seed=0"], [(0, 0.1), (100, 0.9), (200, 0.95), (300, 0.95)], seed=0)
    make_run(root / "b" / "1", [*common, *gigpo, "seed=1"], [(0, 0.1), (100, 0.4), (200, 0.6)], seed=1)
    make_run(root / "b" / "2", [*common, *gigpo, "seed=2"], [(0, 0.1), (100, 0.3)], seed=2, status="failed",
             summary=False)
    return root


# Pure functions, against hand-worked values.

def test_steps_to_target_is_the_first_evaluation_at_or_above_it_without_interpolation():
    curve = [(0, 0.1), (100, 0.5), (250, 0.8), (400, 0.9)]
    assert steps_to_target(curve, 0.8) == 250  # reached exactly
    assert steps_to_target(curve, 0.65) == 250  # not 175: no interpolation between 100 and 250
    assert steps_to_target(curve, 0.85) == 400
    assert steps_to_target(curve, 0.1) == 0
    assert steps_to_target(curve, 0.95) is None
    assert steps_to_target([], 0.5) is None
    assert steps_to_target([(0, 0.9), (100, 0.2), (200, 0.9)], 0.8) == 0  # the first crossing, not the last


def test_mean_and_sample_standard_deviation():
    mean, std = mean_and_std([1.0, 2.0, 3.0, 4.0])
    assert mean == 2.5
    assert std == pytest.approx(math.sqrt(5 / 3))  # squared deviations 2.25+0.25+0.25+2.25 = 5, over n-1 = 3
    assert mean_and_std([5.0]) == (5.0, None)
    with pytest.raises(ValueError):
        mean_and_std([])


def test_value_at_holds_the_last_evaluation():
    curve = [(0, 0.2), (100, 0.6)]
    assert value_at(curve, 0) == 0.2
    assert value_at(curve, 50) == 0.2
    assert value_at(curve, 100) == 0.6
    assert value_at(curve, 150) == 0.6
    with pytest.raises(ValueError):
        value_at([(10, 0.5)], 5)


def test_mean_curve_combines_seeds_on_the_common_grid_by_holding():
    a = [(0, 0.0), (100, 0.4), (200, 0.8)]
    b = [(0, 0.2), (150, 0.6), (300, 1.0)]
    curve = mean_curve([a, b])
    # Grid: both seeds' steps from 0 up to 200, the earlier of the two last evaluations.
    assert curve.steps == [0, 100, 150, 200]
    # a held: 0.0 0.4 0.4 0.8; b held: 0.2 0.2 0.6 0.6.
    assert curve.mean == pytest.approx([0.1, 0.3, 0.5, 0.7])
    assert curve.std == pytest.approx([0.2 / math.sqrt(2)] * 4)  # two values 0.2 apart
    assert curve.seeds == 2

    late_start = mean_curve([[(50, 0.5), (100, 0.7)], a])
    assert late_start.steps == [50, 100]  # starts where every seed has been evaluated
    assert late_start.mean == pytest.approx([0.25, 0.55])

    single = mean_curve([a, []])
    assert single.steps == [0, 100, 200] and single.std == [None, None, None] and single.seeds == 1
    assert mean_curve([]).steps == []


# Loading and grouping.

def test_seeds_group_into_configurations_labelled_by_what_differs(tmp_path):
    runs = load_runs(make_sweep(tmp_path))
    assert len(runs) == 6
    configs = configurations(runs)
    assert list(configs) == ["hidden_number: algo=gigpo,imagination.ratio=0", "hidden_number: algo=grpo,imagination.ratio=0.75"]
    assert [r.seed for r in configs["hidden_number: algo=grpo,imagination.ratio=0.75"]] == [0, 1, 2]
    assert [r.status for r in configs["hidden_number: algo=gigpo,imagination.ratio=0"]] == ["done", "done", "failed"]

    grpo0 = configs["hidden_number: algo=grpo,imagination.ratio=0.75"][0]
    assert grpo0.curve == [(0, 0.1), (100, 0.5), (200, 0.8), (300, 0.9), (400, 0.9)]
    assert grpo0.series["wm/one_step_exact_match"] == [(50, 0.2), (150, 0.6)]
    assert grpo0.env == "hidden_number" and grpo0.wall_s == 100.0 and grpo0.final_success == 0.9


def test_labels_show_only_differing_keys():
    assert configuration_labels([{"algo": "grpo", "n": "5"}, {"algo": "gigpo", "n": "5"}]) == ["algo=grpo", "algo=gigpo"]
    # A key one configuration lacks differs; the one without it shows nothing for it.
    assert configuration_labels([{"algo": "grpo"}, {"algo": "grpo", "imagination": "dyna"}]) == [
        "defaults", "imagination=dyna"]
    # A lone configuration: its headline overrides only.
    assert configuration_labels([{"algo": "grpo", "env": "frozen_lake", "trainer.iterations": "9"}]) == [
        "algo=grpo,env=frozen_lake"]
    assert configuration_labels([{"trainer.iterations": "9"}]) == ["all runs"]
    assert configuration_labels([]) == []


def test_ignored_keys_do_not_split_a_configuration(tmp_path):
    make_run(tmp_path / "x", ["algo=grpo", "seed=0", "trainer.time_budget_s=60"], [(0, 0.5)])
    make_run(tmp_path / "y", ["algo=grpo", "seed=1", "trainer.time_budget_s=61"], [(0, 0.5)])
    runs = load_runs(tmp_path)
    assert len(configurations(runs)) == 2
    assert list(configurations(runs, ignore=("seed", "trainer.time_budget_s"))) == ["hidden_number: algo=grpo"]


def test_an_ignored_key_value_pair_leaves_out_that_value_only(tmp_path):
    make_run(tmp_path / "x", ["algo=grpo", "seed=0", "world_model=small"], [(0, 0.5)])
    make_run(tmp_path / "y", ["algo=grpo", "seed=1"], [(0, 0.5)])
    make_run(tmp_path / "z", ["algo=grpo", "seed=2", "world_model=lm"], [(0, 0.5)])
    configs = configurations(load_runs(tmp_path), ignore=("seed", "world_model=small"))
    assert {label: [r.seed for r in runs] for label, runs in configs.items()} == {
        "hidden_number: defaults": [0, 1], "hidden_number: world_model=lm": [2]}


def test_one_name_over_two_configurations_keeps_both_apart(tmp_path):
    # the same benchmark method name, run with other overrides: numbered, neither dropped
    make_run(tmp_path / "a" / "method=mb,seed=0", ["algo=grpo", "seed=0", "world_model.latent_size=64"], [(0, 0.5)])
    make_run(tmp_path / "a" / "method=mb,seed=1", ["algo=grpo", "seed=1", "world_model.latent_size=64"], [(0, 0.6)])
    make_run(tmp_path / "b" / "method=mb,seed=3", ["algo=grpo", "seed=3", "world_model=small"], [(0, 0.7)])
    make_run(tmp_path / "b" / "method=pg,seed=3", ["algo=gigpo", "seed=3"], [(0, 0.7)])

    def name(run):
        return run.path.name.split(",")[0].removeprefix("method=")

    configs = configurations(load_runs(tmp_path), names=name)
    assert {label: [r.seed for r in runs] for label, runs in configs.items()} == {
        "mb (#1)": [0, 1], "mb (#2)": [3], "pg": [3]}


def test_where_warm_starts_lie_or_how_often_runs_checkpoint_never_splits_a_configuration(tmp_path):
    make_run(tmp_path / "x", ["algo=grpo", "seed=0"], [(0, 0.5)])
    make_run(tmp_path / "y", ["algo=grpo", "seed=1", "trainer.warm_start.cache_dir=/cache", "trainer.checkpoint_every=10"],
             [(0, 0.5)])
    make_run(tmp_path / "z", ["algo=gigpo", "seed=0", "trainer.warm_start.cache_dir=/other"], [(0, 0.5)])
    assert list(configurations(load_runs(tmp_path))) == ["hidden_number: algo=gigpo", "hidden_number: algo=grpo"]


def test_overrides_and_seed_from_the_folder_name_without_hydra_files(tmp_path):
    make_run(tmp_path / "algo=grpo,seed=1", None, [(0, 0.2)], summary=False)
    make_run(tmp_path / "algo=grpo,seed=2", None, [(0, 0.4)], summary=False)
    make_run(tmp_path / "12-00-00_hidden_number_gigpo_s3", None, [(0, 0.6)], summary=False)
    make_run(tmp_path / "13-30-00_hidden_number_gigpo_s4", None, [(0, 0.8)], summary=False)
    configs = configurations(load_runs(tmp_path))
    assert {label: [r.seed for r in runs] for label, runs in configs.items()} == {
        "algo=grpo": [1, 2], "hidden_number_gigpo": [3, 4]}


def test_a_run_without_summary_or_marker_is_running_and_reads_its_metrics(tmp_path):
    folder = make_run(tmp_path / "r", ["seed=3"], [(0, 0.1), (40, 0.3), (80, 0.2)], status="running",
                      summary=False)
    with (folder / "metrics.jsonl").open("a") as handle:
        handle.write('{"iteration": 3, "charts/real_env_st')  # a record still being written
    (run,) = load_runs(tmp_path)
    assert run.status == "running" and run.seed == 3
    assert run.final_success == 0.2  # the last evaluation
    assert run.wall_s == 20.0  # the last charts/elapsed_s
    assert run.real_env_steps == 80


def test_a_repeated_final_evaluation_keeps_the_later_record(tmp_path):
    folder = tmp_path / "r"
    folder.mkdir()
    records = [{"iteration": 0, "charts/real_env_steps": 0, "eval/success_rate": 0.1},
               {"iteration": 4, "charts/real_env_steps": 90, "charts/success_rate": 0.5},
               {"iteration": 4, "charts/real_env_steps": 90, "eval/success_rate": 0.7}]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (run,) = load_runs(folder)  # the folder itself is the run
    assert run.curve == [(0, 0.1), (90, 0.7)]


# The table.

def test_table_is_best_first_with_not_reached_counts(tmp_path):
    curves = {
        # Each crossing holds for the next two evaluations: 200 and 300 steps, mean 250, std 70.7.
        "fast": [[(0, 0.1), (200, 0.8), (300, 0.8), (400, 0.8)], [(0, 0.1), (300, 0.9), (400, 0.9), (500, 0.9)]],
        "slow": [[(0, 0.1), (400, 0.85), (500, 0.85), (600, 0.85)]],  # 400 steps, one seed
        "also_fast_but_worse": [[(0, 0.1), (250, 0.8), (260, 0.8), (270, 0.8)]] * 2,  # 250 ± 0, lower final
        "half": [[(0, 0.1), (100, 0.9), (110, 0.9), (120, 0.9)], [(0, 0.1), (100, 0.4)]],  # one seed reaches it
        "never": [[(0, 0.1), (100, 0.5)], [(0, 0.1), (100, 0.9), (110, 0.9)]],  # 0.9 not held for two more
    }
    for name, seeds in curves.items():
        for seed, curve in enumerate(seeds):
            make_run(tmp_path / f"{name}_s{seed}", None, curve, seed=seed)
    rows = summary_rows(configurations(load_runs(tmp_path)), 0.8)
    assert [row.label for row in rows] == [f"{ENV}: {name}" for name in ("fast", "also_fast_but_worse", "slow", "half", "never")]
    fast = rows[0]
    assert fast.steps == [200, 300] and fast.steps_mean == 250
    assert fast.steps_std == pytest.approx(math.sqrt(2 * 50**2))  # 70.71
    assert fast.final_mean == pytest.approx(0.85) and fast.final_std == pytest.approx(0.05 * math.sqrt(2))
    # 95% interval on the log scale, one degree of freedom (t = tan(0.475 pi) = 12.706): geometric mean
    # sqrt(200 * 300) = 244.9 times exp(-+ 12.706 * (log 1.5 / sqrt 2) / sqrt 2) = exp(-+ 2.576): 18.6 and 3,220
    half = math.tan(0.475 * math.pi) * math.log(1.5) / 2
    assert fast.steps_ci == pytest.approx((math.sqrt(60000) * math.exp(-half), math.sqrt(60000) * math.exp(half)))
    assert fast.steps_text() == "245 [19, 3,220]" and fast.final_text() == "0.85 ± 0.07"
    assert rows[2].steps_text() == "400 (too few seeds to bound)" and rows[2].final_text() == "0.85"  # one seed
    assert rows[3].steps_text() == "not reached (1/2)" and rows[3].reached == 1
    assert rows[4].steps_text() == "not reached (0/2)"

    table = format_table(rows, 0.8).splitlines()
    assert table[0].split("|")[1:-1] == [" configuration                      ", " real steps to 0.8            ", " final success ",
                                         " wall time ", " CPU time ", " seeds "]
    assert "| hidden_number: fast " in table[2] and "245 [19, 3,220]" in table[2] and "60 ± 0 s" in table[2]  # both seeds took 60 s
    assert "| hidden_number: slow " in table[4] and "| 60 s " in table[4]  # one seed: no spread
    assert "not reached (1/2)" in table[5]


def test_a_failed_run_is_listed_as_failed_and_left_out_of_the_statistics(tmp_path):
    configs = configurations(load_runs(make_sweep(tmp_path)))
    rows = summary_rows(configs, 0.8)
    assert [row.label for row in rows] == ["hidden_number: algo=grpo,imagination.ratio=0.75", "hidden_number: algo=gigpo,imagination.ratio=0"]
    grpo, gigpo = rows
    assert grpo.steps == [200, 150, None] and grpo.steps_mean == pytest.approx(175)  # seed 2 never held it
    assert grpo.steps_text() == "not reached (2/3)" and grpo.steps_ci is None
    assert grpo.wall_mean_s == 150.0 and grpo.wall_std_s == pytest.approx(50.0)  # 100, 200, 150 s
    assert grpo.wall_text() == "2.5 ± 0.8 min"
    assert gigpo.seeds == 2 and gigpo.failed == 1 and gigpo.seeds_text() == "2 (1 failed)"
    assert gigpo.steps_text() == "not reached (1/2)"
    assert gigpo.final_mean == pytest.approx(0.775)  # the failed seed's 0.3 is not in it

    runs = run_table(configs, 0.8, relative_to=tmp_path).splitlines()
    failed = [line for line in runs if "| failed " in line]
    assert len(failed) == 1 and "b/2" in failed[0] and "not reached" in failed[0]


def test_cpu_time_is_mean_and_spread_over_the_seeds_and_a_dash_for_older_runs(tmp_path):
    curve = [(0, 0.1), (100, 0.9), (200, 0.9), (300, 0.9)]
    for seed, cpu in enumerate([90.0, 150.0, 120.0]):  # mean 120 s, sample std 30 s
        make_run(tmp_path / f"new_s{seed}", None, curve, seed=seed, cpu_s=cpu)
    make_run(tmp_path / "old_s0", None, curve, seed=0)  # no cpu_seconds in its summary
    make_run(tmp_path / "mixed_s0", None, curve, seed=0, cpu_s=30.0)
    make_run(tmp_path / "mixed_s1", None, curve, seed=1)
    configs = configurations(load_runs(tmp_path))
    rows = {row.label.removeprefix(f"{ENV}: "): row for row in summary_rows(configs, 0.8)}
    assert rows["new"].cpu_mean_s == pytest.approx(120.0) and rows["new"].cpu_std_s == pytest.approx(30.0)
    assert rows["new"].cpu_text() == "2.0 ± 0.5 min"
    assert rows["old"].cpu_mean_s is None and rows["old"].cpu_text() == "-"
    assert rows["mixed"].cpu_text() == "30 s (1/2)"  # only one seed recorded it
    lines = format_table(list(rows.values()), 0.8).splitlines()
    header = [cell.strip() for cell in lines[0].split("|")[1:-1]]
    assert header[-3:] == ["wall time", "CPU time", "seeds"]
    cells = {line.split("|")[1].strip().removeprefix(f"{ENV}: "): [c.strip() for c in line.split("|")[1:-1]] for line in lines[2:]}
    assert cells["new"][header.index("CPU time")] == "2.0 ± 0.5 min"
    assert cells["old"][header.index("CPU time")] == "-"
    runs = run_table(configs, 0.8).splitlines()
    run_header = [cell.strip() for cell in runs[0].split("|")[1:-1]]
    by_folder = {line.split("|")[-2].strip().rsplit("/", 1)[-1]: [c.strip() for c in line.split("|")[1:-1]]
                 for line in runs[2:]}
    assert by_folder["new_s1"][run_header.index("CPU time")] == "2.5 min"  # 150 s
    assert by_folder["old_s0"][run_header.index("CPU time")] == "-"


def test_the_ledger_table_shows_warm_start_check_steps_and_a_dash_when_unknown(tmp_path):
    from experiments.reporting.table import ledger_table

    base = {"real_env_steps": 900, "warm_start_expert_steps": 1234, "world_model_real_steps": 0,
            "world_model_expert_steps": 0, "critic_real_steps": 0, "eval_env_steps": 2560, "evaluations": 4}
    curve = [(0, 0.1), (900, 0.5)]
    make_run(tmp_path / "cloned_s0", None, curve, seed=0, ledger={**base, "warm_start_check_steps": 4321})
    make_run(tmp_path / "unknown_s0", None, curve, seed=0, ledger={**base, "warm_start_check_steps": None})
    make_run(tmp_path / "older_s0", None, curve, seed=0, ledger=base)  # before the entry existed
    lines = ledger_table(configurations(load_runs(tmp_path))).splitlines()
    header = [cell.strip() for cell in lines[0].split("|")[1:-1]]
    column = header.index("warm-start check steps")
    assert header[column - 1] == "warm-start expert steps"
    cells = {line.split("|")[1].strip(): line.split("|")[1:-1][column].strip() for line in lines[2:]}
    assert cells == {"hidden_number: cloned": "4,321", "hidden_number: unknown": "-", "hidden_number: older": "-"}


def test_the_ledger_table_shows_the_imported_steps_only_when_a_run_started_from_saved_models(tmp_path):
    from experiments.reporting.table import ledger_table

    base = {"real_env_steps": 900, "warm_start_expert_steps": 1234, "world_model_real_steps": 0,
            "world_model_expert_steps": 0, "critic_real_steps": 0, "eval_env_steps": 2560, "evaluations": 4}
    curve = [(0, 0.1), (900, 0.5)]
    make_run(tmp_path / "fresh_s0", None, curve, seed=0, ledger=base)
    assert "imported" not in ledger_table(configurations(load_runs(tmp_path)))
    make_run(tmp_path / "warm_s0", None, curve, seed=0, ledger={**base, "imported_critic_real_steps": 5120,
                                                               "imported_critic_expert_steps": 0})
    lines = ledger_table(configurations(load_runs(tmp_path))).splitlines()
    header = [cell.strip() for cell in lines[0].split("|")[1:-1]]
    column = header.index("imported critic: real")
    cells = {line.split("|")[1].strip(): line.split("|")[1:-1][column].strip() for line in lines[2:]}
    assert cells == {"hidden_number: warm": "5,120", "hidden_number: fresh": "-"}


def test_the_ledger_table_names_its_first_two_columns_and_each_runs_seed(tmp_path):
    from experiments.reporting.table import ledger_table

    ledger = {"real_env_steps": 900, "eval_env_steps": 2560}
    make_run(tmp_path / "seeded_s3", None, [(0, 0.1), (900, 0.5)], seed=3, ledger=ledger)
    make_run(tmp_path / "seeded_s5", None, [(0, 0.1), (900, 0.5)], seed=5, ledger=ledger)
    lines = ledger_table(configurations(load_runs(tmp_path))).splitlines()
    assert [cell.strip() for cell in lines[0].split("|")[1:3]] == ["configuration", "seed"]
    seeds = sorted(line.split("|")[2].strip() for line in lines[2:])
    assert seeds == ["3", "5"]


def test_the_ledger_table_shows_a_dash_for_a_run_without_a_known_seed(tmp_path):
    from experiments.reporting.table import ledger_table

    # No seed override, no config, no summary.json and no _s<seed> in the folder name: the seed is unknown.
    make_run(tmp_path / "unseeded", None, [(0, 0.1), (900, 0.5)], summary=False)
    lines = ledger_table(configurations(load_runs(tmp_path))).splitlines()
    assert [line.split("|")[2].strip() for line in lines[2:]] == ["-"]


def test_value_at_a_budget_needs_the_run_to_have_spent_it():
    curve = [(0, 0.1), (100, 0.5), (240, 0.8)]
    assert value_at_budget(curve, 0) == 0.1 and value_at_budget(curve, 99) == 0.1
    assert value_at_budget(curve, 100) == 0.5 and value_at_budget(curve, 240) == 0.8
    assert value_at_budget(curve, 241) is None  # stopped before it spent 241 steps
    assert value_at_budget([(50, 0.3), (90, 0.4)], 10) is None and value_at_budget([], 10) is None


def test_success_at_budgets_over_the_seeds_that_spent_them(tmp_path):
    configs = configurations(load_runs(make_sweep(tmp_path / "sweep")))
    rows = {row.label.split(",")[0]: row for row in summary_rows(configs, 0.8, at=(150, 250))}
    grpo, gigpo = rows["hidden_number: algo=grpo"], rows["hidden_number: algo=gigpo"]
    # At 150 steps grpo's seeds hold 0.5 (evaluated at 100), 0.85 (150) and 0.7 (120).
    assert grpo.at_budget[0] == (150, (0.5, 0.85, 0.7))
    assert grpo.budget_text(grpo.at_budget[0][1]) == "0.68 ± 0.18"  # mean 2.05 / 3, sample std 0.1756
    # At 250 seed 2 had stopped (last evaluation at 240): two of three seeds count.
    assert grpo.at_budget[1] == (250, (0.8, 0.85, None))
    assert grpo.budget_text(grpo.at_budget[1][1]).endswith("(2/3)")
    assert gigpo.at_budget == ((150, (0.9, 0.4)), (250, (0.95, None)))  # the failed seed is not counted
    assert gigpo.budget_text(gigpo.at_budget[1][1]) == "0.95 (1/2)"
    lines = format_table(list(rows.values()), 0.8).splitlines()
    header, first, second = ([cell.strip() for cell in line.split("|")[1:-1]] for line in (lines[0], *lines[2:]))
    assert header[2:4] == ["success at 150", "success at 250"]
    assert first[2] == "0.68 ± 0.18" and second[2] == "0.65 ± 0.35"  # gigpo: (0.9 + 0.4) / 2, std 0.354


# Files and the command line.

def test_write_report_writes_the_png_and_the_markdown(tmp_path):
    sweep = make_sweep(tmp_path / "sweep")
    png, md = report.write_report(sweep, tmp_path / "out", 0.8)
    assert png == tmp_path / "out" / "report.png" and md == tmp_path / "out" / "report.md"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = md.read_text()
    assert "| hidden_number: algo=grpo,imagination.ratio=0.75 " in text and "not reached (1/2)" in text
    assert text.index("algo=grpo,imagination.ratio=0.75") < text.index("algo=gigpo,imagination.ratio=0")
    assert "](report.png)" in text and "| failed " in text and "../sweep/b/2" in text

    runs = load_runs(sweep)
    png2, md2 = report.write_report(runs, tmp_path / "out2", 0.5, name="baselines")
    assert png2.name == "baselines.png" and md2.name == "baselines.md" and png2.stat().st_size > 0
    with pytest.raises(report.NoRunsError, match="is not a folder"):
        report.write_report(tmp_path / "nothing", tmp_path / "out3")
    (tmp_path / "empty").mkdir()
    with pytest.raises(report.NoRunsError, match="no run folder"):
        report.write_report(tmp_path / "empty", tmp_path / "out3")
    with pytest.raises(ValueError, match="target"):
        report.write_report(sweep, tmp_path / "out4", 80)
    with pytest.raises(ValueError, match="--at budgets and --max-steps"):
        report.write_report(sweep, tmp_path / "out4", 0.8, at=(0,))
    png3, md3 = report.write_report(sweep, tmp_path / "out5", 0.8, at=(150,), max_steps=200)
    assert png3.stat().st_size > 0 and "success at 150" in md3.read_text()


def test_extra_panels_only_when_a_run_logged_them(tmp_path):
    configs = configurations(load_runs(make_sweep(tmp_path / "sweep")))
    assert panel_series(configs) == [None, "wm/one_step_exact_match", "imagination/return_gap"]
    make_run(tmp_path / "plain" / "r", ["seed=0"], [(0, 0.1), (10, 0.2)])
    assert panel_series(configurations(load_runs(tmp_path / "plain"))) == [None]
    make_run(tmp_path / "starts" / "r", ["seed=0"], [(0, 0.1)], series={"imagination/start_return_gap": [(5, 0.1)]})
    assert panel_series(configurations(load_runs(tmp_path / "starts"))) == [None, "imagination/start_return_gap"]
    assert [panel[0] for panel in figure_panels(configs, only=[None])] == [None]  # the headline's one panel
    assert [panel[0] for panel in figure_panels(configs, only=["imagination/return_gap", "absent"])] == \
        ["imagination/return_gap"]
    assert [panel[0] for panel in figure_panels(configs)] == panel_series(configs)


def test_panel_curves_are_seed_means_of_the_logged_series(tmp_path):
    # Two seeds log world-model exact match at different steps, a third never does (left out of the
    # mean), a fourth failed; the gap panel skips a NaN the run wrote.
    wm, gap = "wm/one_step_exact_match", "imagination/return_gap"
    make_run(tmp_path / "mb_s0", ["imagination=dyna", "seed=0"], [(0, 0.1), (200, 0.5)], seed=0,
             series={wm: [(50, 0.2), (150, 0.6)], gap: [(50, 0.5), (100, float("nan")), (150, -0.1)]})
    make_run(tmp_path / "mb_s1", ["imagination=dyna", "seed=1"], [(0, 0.1), (200, 0.7)], seed=1,
             series={wm: [(60, 0.4), (140, 0.8), (200, 1.0)], gap: [(60, 0.3), (140, 0.1)]})
    make_run(tmp_path / "mb_s2", ["imagination=dyna", "seed=2"], [(0, 0.1), (200, 0.6)], seed=2)
    make_run(tmp_path / "mb_s3", ["imagination=dyna", "seed=3"], [(0, 0.1)], seed=3, status="failed",
             series={wm: [(50, 0.0), (150, 0.0)]})
    make_run(tmp_path / "mf_s0", ["imagination=model_free", "seed=0"], [(0, 0.1), (200, 0.4)], seed=0)
    configs = configurations(load_runs(tmp_path))
    assert panel_series(configs) == [None, wm, gap]

    curves = panel_curves(configs, wm)
    assert list(curves) == ["hidden_number: imagination=dyna"]  # the model-free run logged none
    exact = curves["hidden_number: imagination=dyna"]
    # Grid 60..150 (latest first point, earliest last point); each seed holds its last value:
    # 60: (0.2 + 0.4) / 2, 140: (0.2 + 0.8) / 2, 150: (0.6 + 0.8) / 2.
    assert exact.seeds == 2 and exact.steps == [60, 140, 150]
    assert exact.mean == pytest.approx([0.3, 0.5, 0.7])
    assert exact.std == pytest.approx([math.sqrt(0.02), math.sqrt(0.18), math.sqrt(0.02)])
    returns = panel_curves(configs, gap)["hidden_number: imagination=dyna"]
    # The NaN at 100 steps is not a point: seed 0 holds 0.5 until 150.
    assert returns.steps == [60, 140] and returns.mean == pytest.approx([0.4, 0.3])
    success = panel_curves(configs, None)
    assert success["hidden_number: imagination=dyna"].seeds == 3 and success["hidden_number: imagination=dyna"].mean[-1] == pytest.approx(0.6)

    make_run(tmp_path / "plain" / "r", ["seed=0"], [(0, 0.1), (10, 0.2)])
    plain = configurations(load_runs(tmp_path / "plain"))
    assert panel_series(plain) == [None] and panel_curves(plain, wm) == {}


def test_durations_keep_one_unit_for_mean_and_spread():
    assert format_duration(45.2) == "45 s" and format_duration(45.2, 3.3) == "45 ± 3 s"
    assert format_duration(150, 30) == "2.5 ± 0.5 min" and format_duration(7200, 360) == "2.0 ± 0.1 h"
    assert format_duration(None) == "-" and format_duration(float("nan"), 1.0) == "-"
    assert format_duration(720_000) == "200.0 h"  # 720,000 / 3,600 by hand: an hour is 3,600 s exactly


@pytest.mark.slow
def test_cli_on_a_sweep_prints_the_table_then_the_paths(tmp_path):
    sweep = make_sweep(tmp_path / "sweep")
    result = subprocess.run([sys.executable, "-m", "experiments.report", str(sweep), "--target", "0.8"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("| configuration") and "real steps to 0.8" in lines[0]
    assert lines[2].startswith("| hidden_number: algo=grpo,imagination.ratio=0.75")
    assert lines[-2] == f"plot: {sweep / 'report.png'}" and lines[-1] == f"table: {sweep / 'report.md'}"
    assert (sweep / "report.png").is_file() and (sweep / "report.md").is_file()


@pytest.mark.slow
def test_cli_on_an_empty_folder_says_so_in_one_line_and_fails(tmp_path):
    result = subprocess.run([sys.executable, "-m", "experiments.report", str(tmp_path)], cwd=ROOT,
                            capture_output=True, text=True, timeout=120, env={"OMP_NUM_THREADS": "1"})
    assert result.returncode != 0
    assert result.stdout == ""
    assert result.stderr.strip().count("\n") == 0 and "no run folder" in result.stderr


def test_help_explains_every_option(capsys):
    with pytest.raises(SystemExit) as exit_info:
        report.main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for option in ("DIR", "--target", "--out", "--ignore"):
        assert option in out


def test_a_configuration_whose_runs_all_failed_comes_last_without_statistics(tmp_path):
    make_run(tmp_path / "ok_s0", None, [(0, 0.1), (100, 0.3)])
    make_run(tmp_path / "broken_s0", None, [(0, 0.1)], status="failed")
    rows = summary_rows(configurations(load_runs(tmp_path)), 0.8)
    assert [row.label for row in rows] == ["hidden_number: ok", "hidden_number: broken"]
    assert rows[1].seeds == 0 and rows[1].seeds_text() == "0 (1 failed)"
    assert rows[1].steps_text() == "-" and rows[1].final_text() == "-"
    png, md = report.write_report(tmp_path, tmp_path / "out")
    assert png.stat().st_size > 0 and "| hidden_number: broken " in md.read_text()


def test_cli_refuses_a_target_outside_zero_one(tmp_path, capsys):
    make_run(tmp_path / "r_s0", None, [(0, 0.1)])
    assert report.main([str(tmp_path), "--target", "80"]) == 2
    assert "target" in capsys.readouterr().err


def test_seeds_sort_by_number_with_an_unknown_seed_last_whatever_the_folder_order(tmp_path):
    # folder order is "0" (no seed), "a" (seed 1), "b" (seed 0); no summaries, so no seed falls back to 0
    make_run(tmp_path / "a", ["algo=grpo", "seed=1"], [(0, 0.5)], summary=False)
    make_run(tmp_path / "b", ["algo=grpo", "seed=0"], [(0, 0.5)], summary=False)
    make_run(tmp_path / "0", ["algo=grpo"], [(0, 0.5)], summary=False)
    configs = configurations(load_runs(tmp_path))
    assert [[r.seed for r in runs] for runs in configs.values()] == [[0, 1, None]]


def test_a_name_shared_by_two_envs_gets_its_env_and_a_run_without_a_name_keeps_its_label(tmp_path):
    make_run(tmp_path / "m" / "one", ["algo=grpo", "seed=0"], [(0, 0.5)], env="hidden_number")
    make_run(tmp_path / "m" / "two", ["algo=grpo", "seed=0"], [(0, 0.5)], env="frozen_lake")
    make_run(tmp_path / "unnamed" / "three", ["algo=gigpo", "seed=0"], [(0, 0.5)], env="hidden_number")

    def name(run):
        return None if run.path.parent.name == "unnamed" else run.path.parent.name

    assert sorted(configurations(load_runs(tmp_path), names=name)) == [
        "frozen_lake: m", "hidden_number: algo=gigpo", "hidden_number: m"]
