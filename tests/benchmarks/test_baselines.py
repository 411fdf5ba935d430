"""The baselines benchmark: its runs reported through the run report, and its command line."""

import json
import sys

import pytest

from benchmarks import baselines
from tests.experiments.test_report import make_run


def test_baselines_reports_its_runs_with_the_run_report(tmp_path, monkeypatch, capsys):
    def fake_run_one(env, algo, args):
        run_dir = args.out / f"{env}_{algo}_s{args.seed}"
        final = 0.9 if algo == "gigpo" else 0.5
        make_run(run_dir, [f"experiment={env}", f"algo={algo}", f"seed={args.seed}"],
                 [(0, 0.3), (100, final)], seed=args.seed, env=env)
        return run_dir

    monkeypatch.setattr(baselines, "run_one", fake_run_one)
    monkeypatch.setattr(sys, "argv", ["baselines", "--envs", "hidden_number", "frozen_lake", "--algos", "grpo",
                                      "gigpo", "--out", str(tmp_path), "--target", "0.8"])
    baselines.main()
    out = capsys.readouterr().out
    assert "| frozen_lake: algo=gigpo " in out and "not reached (0/1)" in out
    assert out.strip().splitlines()[-1] == f"table: {tmp_path / 'baselines.md'}"
    assert (tmp_path / "baselines.png").stat().st_size > 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert {(row["env"], row["algo"], row["initial"], row["final"], row["done"]) for row in summary} == {
        ("hidden_number", "grpo", 0.3, 0.5, True), ("hidden_number", "gigpo", 0.3, 0.9, True),
        ("frozen_lake", "grpo", 0.3, 0.5, True), ("frozen_lake", "gigpo", 0.3, 0.9, True)}

    monkeypatch.setattr(sys, "argv", ["baselines", "--help"])
    with pytest.raises(SystemExit) as exit_info:
        baselines.main()
    assert exit_info.value.code == 0 and "--target" in capsys.readouterr().out
