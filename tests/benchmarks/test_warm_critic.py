"""The warm-critic benchmark runs end to end with tiny budgets (no quality claims): each arm has its
explained variances, and the warm runs start from the earlier run's critic, on the ledger."""

import json
import math

import pytest

from benchmarks import warm_critic as bench


def test_only_the_iterations_explained_variances_are_read():
    rows = [{"iteration": 0, "eval/success_rate": 0.1}, {"iteration": 1, bench.EV: 0.25},
            {"iteration": 2, "eval/success_rate": 0.2}, {"iteration": 2, bench.EV: -0.5}]
    assert bench.explained_variances(rows) == [0.25, -0.5]


def test_the_mean_line_pairs_the_arms_by_seed():
    # seed 1: fresh (0 + 0.2) / 2 = 0.1, warm 0.3 -> +0.2; seed 2: fresh 0.0, warm 0.4 -> +0.4.
    # Mean difference 0.3; standard error = stdev(0.2, 0.4) / sqrt 2 = 0.1414 / 1.414 = 0.1.
    values = {"fresh": {1: [0.0, 0.2], 2: [0.0, 0.0]}, "warm": {1: [0.3, 0.3], 2: [0.4, 0.4]}}
    assert bench.mean_line(values, [1, 2]) == ("mean over the iterations: fresh 0.050, warm 0.350, "
                                               "warm - fresh +0.300 (standard error over 2 seeds 0.100)")


@pytest.mark.slow
def test_tiny_run_compares_a_warm_and_a_fresh_critic(tmp_path, capsys):
    values = bench.main(["--earlier-iterations", "1", "--iterations", "1", "--seeds", "1", "--out", str(tmp_path)])
    assert set(values) == {"fresh", "warm"}
    assert all(len(v[1]) == 1 and math.isfinite(v[1][0]) for v in values.values())
    earlier = json.loads((tmp_path / "earlier" / "summary.json").read_text())["ledger"]
    warm = json.loads((tmp_path / "warm_seed1" / "summary.json").read_text())["ledger"]
    fresh = json.loads((tmp_path / "fresh_seed1" / "summary.json").read_text())["ledger"]
    assert warm["imported_critic_real_steps"] == earlier["critic_real_steps"] > 0
    assert fresh["imported_critic_real_steps"] == 0
    assert "warm - fresh" in capsys.readouterr().out
