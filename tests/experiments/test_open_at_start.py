"""``imagination.open_at_start``: the gate starts open, a checkpoint's gate wins over it on resume, and
the settings where it has no meaning are refused at start in one line naming the keys."""

from __future__ import annotations

import dataclasses
import json

import pytest

from envs import TrajectoryStore
from experiments.checkpoint import LoopState
from experiments.config import validate
from experiments.loop_progress import LoopProgress
from imagination.config import ImaginationConfig
from tests.experiments.test_init_models import compose_train, one_line


def test_the_gate_starts_open_only_with_the_key():
    on = LoopProgress.fresh(ImaginationConfig(ratio=0.9, open_at_start=True), branch_seed=0, warm_start_env_steps=0)
    off = LoopProgress.fresh(ImaginationConfig(ratio=0.9), branch_seed=0, warm_start_env_steps=0)
    assert (on.gate.is_open, off.gate.is_open) == (True, False)


def test_a_resumed_run_takes_the_checkpoints_gate_not_the_start(tmp_path):
    # A run opened at start whose gate a later score closed: its checkpoint says closed, and so does the resume.
    config = ImaginationConfig(ratio=0.9, open_at_start=True, gate_threshold=0.5)
    saved = LoopProgress.fresh(config, branch_seed=0, warm_start_env_steps=0)
    assert saved.gate.update(0.25) == "closed"
    loop = saved.loop_state(3, stopped=False, metrics_lines=4, store_trajectories=0, counterfactual_recent=None)
    resumed = LoopProgress.fresh(config, branch_seed=0, warm_start_env_steps=0)
    resumed.restore(LoopState(**json.loads(json.dumps(dataclasses.asdict(loop)))), TrajectoryStore(tmp_path / "s"))
    assert resumed.gate == saved.gate and not resumed.gate.is_open


def test_open_at_start_without_a_saved_world_model_is_refused_naming_both_keys():
    with pytest.raises(ValueError) as error:
        validate(compose_train(["env=hidden_number", "imagination=dyna", "imagination.open_at_start=true"]))
    assert one_line(error).startswith("imagination.open_at_start=true needs world_model.init=DIR")


def test_open_at_start_without_imagination_is_refused_naming_the_ratio():
    with pytest.raises(ValueError) as error:  # imagination=model_free: ratio 0
        validate(compose_train(["env=hidden_number", "imagination.open_at_start=true", "world_model.init=/nowhere"]))
    assert one_line(error).startswith("imagination.open_at_start=true needs imagination on (imagination.ratio > 0")
    with pytest.raises(ValueError, match="imagination.open_at_start must be true or false"):
        ImaginationConfig(ratio=0.5, open_at_start=1)
    assert ImaginationConfig(ratio=0.0, warmup_iterations=1, open_at_start=True).open_at_start  # imagines: allowed
