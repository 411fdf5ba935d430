"""The oracle-cost figures against a hand-worked run, and the command on a folder of runs."""

from __future__ import annotations

import json

import pytest

from benchmarks.oracle_cost import main, oracle_cost

RECORDS = [
    {"iteration": 0, "charts/real_env_steps": 0, "eval/success_rate": 0.5},
    {"iteration": 1, "charts/real_env_steps": 1000, "oracle/env_steps": 900, "oracle/replay_env_steps": 50},
    {
        "iteration": 2,
        "charts/real_env_steps": 2100,
        "oracle/env_steps": 980,
        "oracle/replay_env_steps": 60,
        "eval/success_rate": 0.85,
    },
    {
        "iteration": 3,
        "charts/real_env_steps": 3000,
        "oracle/env_steps": 800,
        "oracle/replay_env_steps": 40,
        "eval/success_rate": 0.7,
    },
]


def test_oracle_cost_by_hand():
    # Collected per iteration: 1000 - 900 = 100, 1100 - 980 = 120, 900 - 800 = 100.
    figures = oracle_cost(RECORDS, 0.8)
    assert figures["real_steps"] == 2100 and figures["collected"] == 220 and figures["iteration"] == 2
    assert figures["extra_per_step"] == pytest.approx(2680 / 320)
    assert figures["replay_share"] == pytest.approx(150 / 2680)
    assert figures["final_success"] == 0.7
    never = oracle_cost(RECORDS, 0.9)
    assert never["real_steps"] is None and never["collected"] is None and never["iteration"] is None


def test_the_command_reads_oracle_runs_and_skips_others(tmp_path, capsys):
    for name, records in (("method=real_branch_gigpo,seed=0", RECORDS), ("method=gigpo,seed=0", RECORDS[:1])):
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "method=real_branch_gigpo,seed=0" / "summary.json").write_text(json.dumps({"wall_s": 12.0}))
    main([str(tmp_path), "--target", "0.8"])
    out = capsys.readouterr().out
    assert "method=real_branch_gigpo,seed=0" in out and "method=gigpo" not in out
    assert "2,100" in out and "220" in out and "8.38" in out
    with pytest.raises(SystemExit, match="no run"):
        main([str(tmp_path / "method=gigpo,seed=0")])
