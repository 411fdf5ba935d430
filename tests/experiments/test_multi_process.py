"""Two CPU processes (gloo, ddp_spawn) running the training loop: identical policies, one writer.

Each rank appends its policy's weight hash after every update to a folder named by an environment
variable only this test sets (``experiments.distributed.REPLICA_HASH_DIR_ENV``); the test compares
the two files itself and against the policy rank 0 saved. That only rank 0 wrote the run folder shows
in what a second writer would leave twice: metrics records, TensorBoard event files, stored episodes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envs.store import TrajectoryStore
from experiments.distributed import REPLICA_HASH_DIR_ENV, weights_hash
from policy.model import load_local_pretrained
from tests.experiments.test_imagination_e2e import SMALL_WORLD_MODEL
from tests.experiments.test_train_e2e import REPO, TINY, assert_ok, check_run_dir, read_records

# Each test: a Hydra process and two spawned ranks, ~30 s of CPU (minutes of wall time on busy cores).
pytestmark = pytest.mark.slow

TWO_PROCESSES = ["trainer.devices=2", "trainer.strategy=ddp_spawn", "trainer.accelerator=cpu"]
# Hydra's own files and the parent's markers (config.yaml, done), then what rank 0 writes.
EXPECTED_ENTRIES = {
    ".hydra",
    "train.log",
    "config.yaml",
    "done",
    "metrics.jsonl",
    "tensorboard",
    "trajectories",
    "models",
    "summary.json",
}


def run_two_processes(run_dir: Path, hash_dir: Path, *overrides: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        REPLICA_HASH_DIR_ENV: str(hash_dir),
    }
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.train",
            *TINY,
            *TWO_PROCESSES,
            *overrides,
            f"hydra.run.dir={run_dir}",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_two_processes_keep_identical_policies_and_only_rank0_writes(tmp_path):
    run_dir, hash_dir = tmp_path / "run", tmp_path / "hashes"
    hash_dir.mkdir()
    result = run_two_processes(run_dir, hash_dir)
    assert_ok(result)

    # The same weights on both ranks after every update, and the updates moved them.
    lines = [(hash_dir / f"rank{rank}.txt").read_text().splitlines() for rank in (0, 1)]
    assert lines[0] == lines[1]
    assert [line.split()[0] for line in lines[0]] == ["1", "2"]  # one line per iteration's update
    hashes = [line.split()[1] for line in lines[0]]
    assert hashes[0] != hashes[1]
    saved, _ = load_local_pretrained(run_dir / "models" / "policy")
    assert weights_hash(saved) == hashes[-1]  # rank 0 saved the weights both ranks hold

    # One writer: one record per iteration, one event file, every stored episode once (unique ids).
    records = check_run_dir(run_dir, "gigpo")
    assert len(list((run_dir / "tensorboard").glob("events.out.tfevents.*"))) == 1
    assert {entry.name for entry in run_dir.iterdir()} == EXPECTED_ENTRIES
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["real_env_steps"] == records[-1]["charts/real_env_steps"]


def test_model_based_run_splits_imagination_and_shares_the_world_model(tmp_path):
    """Dyna at ratio 0.5 on 4 groups: each rank plays 1 real and 1 imagined group; rank 0 refits."""
    run_dir, hash_dir = tmp_path / "run", tmp_path / "hashes"
    hash_dir.mkdir()
    result = run_two_processes(
        run_dir,
        hash_dir,
        "algo=grpo",
        "trainer.groups_per_iteration=4",
        "imagination=dyna",
        "imagination.ratio=0.5",
        "imagination.gate_threshold=0",
        *SMALL_WORLD_MODEL,
    )
    assert_ok(result)
    lines = [(hash_dir / f"rank{rank}.txt").read_text().splitlines() for rank in (0, 1)]
    assert lines[0] == lines[1] and len(lines[0]) == 2
    records = read_records(run_dir)[1:]
    assert [r["imagination/imagined_groups"] for r in records] == [2.0, 2.0]  # both ranks' groups, gathered
    assert (run_dir / "models" / "world_model" / "config.json").is_file()
    stored = TrajectoryStore(run_dir / "trajectories").load()
    assert all(t.source == "real" for t in stored)
    assert len({t.trajectory_id for t in stored}) == len(stored)
    assert sum(t.iteration == 2 for t in stored) == 2 * 4  # 2 real groups of 4 per iteration, stored once


def test_two_processes_share_the_real_step_budget(tmp_path):
    # One-turn episodes: a group of 4 is 4 steps, each rank plays 2 of the 4 groups. Iteration 1 could
    # not reach 22 (0 + 16): 16 steps. Iteration 2: 6 left, 3 per rank; each rank's first group takes
    # it to 4 >= 3, so its second is not started: 16 + 2 * 4 = 24, within one group per rank of 22.
    run_dir, hash_dir = tmp_path / "run", tmp_path / "hashes"
    hash_dir.mkdir()
    assert_ok(run_two_processes(run_dir, hash_dir, "trainer.iterations=5", "trainer.groups_per_iteration=4",
                                "trainer.max_turns=1", "trainer.max_env_steps=22"))
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["real_env_steps"] == 24 and summary["iterations"] == 2
    assert summary["budget_cut"] == {"iteration": 2, "max_env_steps": 22, "real_env_steps": 24,
                                     "groups_planned": 4, "groups_played": 2}
