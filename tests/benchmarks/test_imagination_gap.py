"""The model-bias probe: its statistics by hand, its refusals, and one run end to end on a tiny model-based run."""

from __future__ import annotations

import math

import pytest
from omegaconf import OmegaConf

from benchmarks.imagination_gap import gap_statistics, main
from tests.experiments.in_process import compose_config, train_in_process
from tests.experiments.test_determinism import BASE, MODEL_BASED


def test_statistics_by_hand():
    # branch 0: real mean 0.5, imagined mean 1.0, recorded 0; branch 1: real 1.0, imagined 0.5, recorded 1.0
    stats = gap_statistics([[0.0, 1.0], [1.0]], [[1.0, 1.0], [0.0, 1.0]], [0.0, 1.0])
    assert stats.branches == 2
    assert stats.real_return == pytest.approx(0.75) and stats.imagined_return == pytest.approx(0.75)
    assert stats.recorded_return == pytest.approx(0.5)
    assert stats.model_gap == pytest.approx(0.0)  # gaps +0.5 and -0.5
    assert stats.model_gap_half_width == pytest.approx(1.96 * math.sqrt(0.5) / math.sqrt(2))  # stdev of (+0.5, -0.5)
    assert stats.logged_gap == pytest.approx(0.25)  # (1.0 - 0) and (0.5 - 1.0)
    assert stats.policy_lag == pytest.approx(0.25)  # (0.5 - 0) and (1.0 - 1.0)


def test_logged_gap_is_model_gap_plus_policy_lag():
    stats = gap_statistics([[0.2, 0.4], [0.9], [0.0, 0.0, 0.3]], [[0.5], [0.1, 0.7], [1.0]], [0.3, 1.0, 0.0])
    assert stats.logged_gap == pytest.approx(stats.model_gap + stats.policy_lag)


def test_statistics_refuse_mismatched_or_empty_branches():
    with pytest.raises(ValueError, match="one entry per branch"):
        gap_statistics([[1.0]], [[1.0], [0.0]], [0.0])
    with pytest.raises(ValueError, match="at least one real and one imagined"):
        gap_statistics([[1.0], []], [[1.0], [0.0]], [0.0, 0.0])


def test_a_folder_without_a_world_model_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(SystemExit, match="is not a run folder"):
        main([str(tmp_path), "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_end_to_end_on_a_tiny_model_based_run(tmp_path, capsys):
    run_dir, overrides = tmp_path / "run", [*BASE, "algo=grpo", *MODEL_BASED]
    train_in_process(overrides, run_dir)
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(compose_config(overrides), resolve=True))  # as the CLI does
    main([str(run_dir), "--branches", "3", "--rollouts", "2", "--out", str(tmp_path / "out")])
    printed = capsys.readouterr().out
    row = next(line for line in printed.splitlines() if "/run | " in line)  # named parent/run
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "3" and all(math.isfinite(float(c.split()[0])) for c in cells[2:])
    assert (tmp_path / "out" / "imagination_gap.png").stat().st_size > 0
    assert (tmp_path / "out" / "imagination_gap.md").read_text().count("\n") == 3  # header, rule, one run
