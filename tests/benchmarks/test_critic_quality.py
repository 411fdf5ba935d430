"""The critic-quality benchmark runs end to end with tiny budgets and prints both critics' rows (no quality claims)."""

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import critic_quality as bench

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_tiny_run_prints_a_row_per_critic():
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.critic_quality", "--episodes", "9", "--eval-episodes", "6",
         "--steps", "3", "--batch-size", "8", "--token-hidden-size", "16"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("critic"))
    rows = {line.split()[0]: line.split() for line in lines[header + 1 : header + 3]}
    assert set(rows) == {"latent", "token"}
    for cells in rows.values():
        assert len(cells) == 7 and all(math.isfinite(float(c.replace(",", ""))) for c in cells[1:])
    assert "held-out MSE of the training mean" in proc.stdout


def test_agent_mix_uses_disjoint_seeds_and_every_agent():
    train = bench.collect_mix("hidden_number", bench.ENVS["hidden_number"], "train", 6)
    held = bench.collect_mix("hidden_number", bench.ENVS["hidden_number"], "eval", 6)
    assert not {t.seed for t in train} & {t.seed for t in held}
    assert [t.group_id for t in train] == [0, 1, 2, 0, 1, 2]
    assert [t.trajectory_id for t in train] == list(range(6))
    assert all(t.success for t in train if t.group_id == 1)  # the expert always finds the number


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="unknown env"):
        bench.run("chess")
    with pytest.raises(ValueError, match="steps"):
        bench.run(steps=0)
