"""Every algorithm resumes exactly: a finished run's folder is turned back into that of a crash after its
last iteration was logged but before that iteration's checkpoint was published, resumed in this
process, and compared with what the run had written the first time.

The real crashes (SIGKILL from outside, and in the middle of a checkpoint write) are in
test_resume_e2e.py; this covers the state each algorithm adds (value models and their optimisers,
the latent critic, a counterfactual critic, world models) at the cost of about one and a half tiny runs.
"""

from __future__ import annotations

import shutil

import pytest
import torch
from safetensors.torch import load_file

from envs import TrajectoryStore
from tests.experiments.in_process import train_in_process
from tests.experiments.test_determinism import BASE, CASES, WEIGHTS, comparable

pytestmark = pytest.mark.slow

RESUMABLE = [*BASE, "trainer.checkpoint_every=1"]  # two iterations: checkpoints 1 and 2


@pytest.mark.parametrize("case", list(CASES))
def test_resume_from_the_previous_checkpoint_ends_the_same(tmp_path, case):
    original, crashed = tmp_path / "original", tmp_path / "crashed"
    overrides = [*RESUMABLE, *CASES[case]]
    train_in_process(overrides, original)
    shutil.copytree(original, crashed)
    # What a kill while publishing iteration 2's checkpoint leaves: its metrics line and store
    # append are there; its checkpoint, the final models and the markers are not.
    for name in ("done", "summary.json", "policy", "critic", "world_model", "checkpoints/iteration_00002"):
        path = crashed / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    stored = TrajectoryStore(original / "trajectories").load()
    assert len(TrajectoryStore(crashed / "trajectories")) == len(
        stored
    )  # iteration 2's append is to be undone
    train_in_process([*overrides, f"resume={crashed}"], crashed)
    assert comparable(crashed) == comparable(original)
    assert TrajectoryStore(crashed / "trajectories").load() == stored
    for name in WEIGHTS:
        if (original / name).exists():
            a, b = (load_file(str(d / name)) for d in (original, crashed))
            assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name
