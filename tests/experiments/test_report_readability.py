"""A report a person can read: one row of panels per env, labels that say the env and only what
differs (long ones cut, with a key table), and runs that failed before writing metrics listed."""

from __future__ import annotations

import struct
from pathlib import Path

from experiments import report
from experiments.reporting import configurations, load_runs
from experiments.reporting.runs import LABEL_MAX
from tests.experiments.test_report import make_run

MANY = [f"trainer.knob_{i}=value_{i}" for i in range(12)]  # a run launched with a long command line


def png_height(path: Path) -> int:
    """The height in pixels, from the PNG's IHDR chunk (bytes 20..24)."""
    return struct.unpack(">I", path.read_bytes()[20:24])[0]


def test_runs_of_two_envs_with_the_same_overrides_are_two_configurations_named_by_env(tmp_path):
    for env in ("gym_text", "textarena"):
        for seed in (0, 1):
            make_run(tmp_path / f"{env}_s{seed}", ["algo=grpo", f"seed={seed}"], [(0, 0.1), (100, 0.5)],
                     seed=seed, env=env)
    configs = configurations(load_runs(tmp_path))
    assert {label: sorted({r.env for r in runs}) for label, runs in configs.items()} == {
        "gym_text: algo=grpo": ["gym_text"], "textarena: algo=grpo": ["textarena"]}


def test_a_report_over_two_envs_draws_a_row_of_panels_per_env(tmp_path):
    for env in ("gym_text", "textarena"):
        make_run(tmp_path / "two" / env, ["algo=grpo", "seed=0"], [(0, 0.1), (100, 0.5)], env=env)
    make_run(tmp_path / "one" / "gym_text", ["algo=grpo", "seed=0"], [(0, 0.1), (100, 0.5)], env="gym_text")
    two, _ = report.write_report(tmp_path / "two", tmp_path / "out_two")
    one, _ = report.write_report(tmp_path / "one", tmp_path / "out_one")
    assert png_height(two) > 1.8 * png_height(one)  # two rows of panels, not one shared panel


def test_long_labels_are_cut_and_spelled_out_in_the_key_table(tmp_path):
    make_run(tmp_path / "a", ["algo=grpo", "experiment=gym_text", "imagination=dyna", *MANY, "seed=0"],
             [(0, 0.1), (100, 0.5)], env="gym_text")
    make_run(tmp_path / "b", ["algo=gigpo", "experiment=gym_text", "seed=0"], [(0, 0.1), (100, 0.6)], env="gym_text")
    labels = list(configurations(load_runs(tmp_path)))
    assert labels == ["gym_text: algo=gigpo", "gym_text: algo=grpo,imagination=dyna +12 (#1)"]
    assert all(len(label) <= len("gym_text: ") + LABEL_MAX + len(" +12 (#1)") for label in labels)
    _, md = report.write_report(tmp_path, tmp_path / "out")
    text = md.read_text()
    table = text.split("## Runs")[0]
    assert max(len(line.split("|")[1]) for line in table.splitlines() if line.startswith("|")) < 60
    key = text.split("## Overrides")[1]
    assert "Shared by every configuration: `experiment=gym_text`." in key
    row = next(line for line in key.splitlines() if "imagination=dyna" in line)
    assert all(f" {pair}" in row for pair in MANY)  # the pairs the label cut, in full, in the key table


def test_a_run_that_failed_before_writing_metrics_is_listed_with_its_status(tmp_path):
    make_run(tmp_path / "ok", ["algo=grpo", "seed=0"], [(0, 0.1), (100, 0.5)])
    crashed = tmp_path / "crashed"
    (crashed / ".hydra").mkdir(parents=True)
    (crashed / ".hydra" / "overrides.yaml").write_text("- algo=ppo_turn\n- seed=0\n")
    (crashed / ".hydra" / "config.yaml").write_text("env:\n  name: hidden_number\n")
    (crashed / "failed").write_text("Traceback: a bad option")
    _, md = report.write_report(tmp_path, tmp_path / "out")
    runs = md.read_text().split("## Runs")[1].split("## Ledger")[0]
    row = next(line for line in runs.splitlines() if "crashed" in line)
    assert "| hidden_number: algo=ppo_turn " in row and "| failed " in row
