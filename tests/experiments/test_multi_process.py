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

from experiments.distributed import REPLICA_HASH_DIR_ENV, weights_hash
from policy.model import load_local_pretrained
from tests.experiments.test_train_e2e import REPO, TINY, assert_ok, check_run_dir

pytestmark = pytest.mark.slow  # two spawned ranks plus the Hydra process: 30-90 s on 2 shared cores

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
    "policy",
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
    saved, _ = load_local_pretrained(run_dir / "policy")
    assert weights_hash(saved) == hashes[-1]  # rank 0 saved the weights both ranks hold

    # One writer: one record per iteration, one event file, every stored episode once (unique ids).
    records = check_run_dir(run_dir, "gigpo")
    assert len(list((run_dir / "tensorboard").glob("events.out.tfevents.*"))) == 1
    assert {entry.name for entry in run_dir.iterdir()} == EXPECTED_ENTRIES
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["real_env_steps"] == records[-1]["charts/real_env_steps"]
