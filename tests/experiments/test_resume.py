"""Resume helpers: the config comparison, RNG states, and rewinding a run folder to its checkpoint."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from envs import Trajectory, TrajectoryStore, Turn
from experiments.checkpoint import CheckpointError, LoopState, flatten_state, unflatten_state
from experiments.resume import (
    capture_rng,
    check_rewindable,
    differing_keys,
    restore_rng,
    rewind_run_folder,
    rollback_store,
    trajectories_by_id,
)


def test_differing_keys_are_dotted_and_complete():
    saved = {
        "seed": 0,
        "algo": {"name": "grpo", "ppo": {"lr": 1e-4, "epochs": 2}},
        "env": {"kwargs": {"n": 5}},
    }
    current = {
        "seed": 0,
        "algo": {"name": "grpo", "ppo": {"lr": 3e-4, "epochs": 2}},
        "env": {"kwargs": {"m": 5}},
        "extra": 1,
    }
    assert differing_keys(saved, current) == ["algo.ppo.lr", "env.kwargs.m", "env.kwargs.n", "extra"]
    assert differing_keys(saved, saved) == []


def draws() -> tuple:
    return random.random(), float(np.random.rand()), float(torch.rand(1))


def test_captured_rng_states_survive_the_checkpoint_format():
    sampling, branch = torch.Generator().manual_seed(3), random.Random(4)
    state = capture_rng({"sampling": sampling}, {"branch": branch})
    expected = (draws(), float(torch.rand(1, generator=sampling)), branch.random())
    tensors, layout = flatten_state(state)
    for _ in range(3):  # move every stream on, then restore them all
        draws(), torch.rand(1, generator=sampling), branch.random()
    restore_rng(unflatten_state(layout, tensors), {"sampling": sampling}, {"branch": branch})
    assert (draws(), float(torch.rand(1, generator=sampling)), branch.random()) == expected
    with pytest.raises(CheckpointError, match="holds RNGs"):
        restore_rng(unflatten_state(layout, tensors), {}, {"branch": branch})


def trajectories(first_id: int, count: int) -> list[Trajectory]:
    turn = Turn("obs", "guess 3", "higher", 0.0, False, True, "obs")
    return [
        Trajectory("hidden_number", {"n": 5}, seed=i, group_id=i, trajectory_id=i, turns=[turn], iteration=1)
        for i in range(first_id, first_id + count)
    ]


def loop_at(store_trajectories: int, metrics_lines: int) -> LoopState:
    return LoopState(
        iteration=2,
        real_env_steps=0,
        warm_start_env_steps=0,
        next_ids={},
        history=[],
        metrics_lines=metrics_lines,
        store_trajectories=store_trajectories,
        elapsed_s=0.0,
    )


def test_rewinding_drops_later_lines_and_appends(tmp_path):
    store = TrajectoryStore(tmp_path / "trajectories")
    store.append(trajectories(0, 3))
    store.append(trajectories(3, 2))  # written after the checkpoint
    (tmp_path / "metrics.jsonl").write_text('{"iteration": 0}\n{"iteration": 1}\n{"iteration": 2}\n{"itera')
    (tmp_path / "failed").write_text("Traceback ...")
    rewind_run_folder(tmp_path, loop_at(store_trajectories=3, metrics_lines=2), tmp_path / "trajectories")
    assert (tmp_path / "metrics.jsonl").read_text() == '{"iteration": 0}\n{"iteration": 1}\n'
    assert TrajectoryStore(tmp_path / "trajectories").load() == trajectories(0, 3)
    assert not (tmp_path / "failed").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.jsonl", "trajectories"]  # no staging left
    kept = TrajectoryStore(tmp_path / "trajectories")
    assert [t.trajectory_id for t in trajectories_by_id(kept, [2, 0])] == [2, 0]
    with pytest.raises(CheckpointError, match=r"lacks trajectories \[4\]"):
        trajectories_by_id(kept, [4])
    with pytest.raises(CheckpointError, match="fewer than the 5 the checkpoint recorded"):
        rollback_store(tmp_path / "trajectories", 5)
    with pytest.raises(
        CheckpointError, match="holds 3 trajectories, fewer than the 5 the checkpoint recorded"
    ):
        check_rewindable(tmp_path, loop_at(store_trajectories=5, metrics_lines=2), tmp_path / "trajectories")
    with pytest.raises(CheckpointError, match="holds 2 lines, fewer than the 3 the checkpoint recorded"):
        check_rewindable(tmp_path, loop_at(store_trajectories=3, metrics_lines=3), tmp_path / "trajectories")


def test_a_rollback_killed_between_its_renames_is_finished(tmp_path):
    path = tmp_path / "trajectories"
    TrajectoryStore(path).append(trajectories(0, 4))
    # The state a kill leaves after "store -> .discard" and before ".rollback -> store".
    TrajectoryStore(tmp_path / "trajectories.rollback").append(trajectories(0, 2))
    path.rename(tmp_path / "trajectories.discard")
    check_rewindable(tmp_path, loop_at(store_trajectories=2, metrics_lines=0), path)  # the new store counts
    rollback_store(path, 2)
    assert TrajectoryStore(path).load() == trajectories(0, 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trajectories"]


def test_resume_config_uses_the_saved_config_and_refuses_changes(tmp_path):
    from experiments.checkpoint import Checkpoint, save_checkpoint
    from experiments.config import validate
    from experiments.resume import config_record, resume_config
    from tests.experiments.in_process import compose_config

    original = ["experiment=learning_check", "algo=grpo", "seed=3", "trainer.progress=false"]
    saved = config_record(validate(compose_config(original)))
    save_checkpoint(tmp_path / "checkpoints", Checkpoint(saved, loop_at(0, 0), {}))
    TrajectoryStore(tmp_path / "trajectories")  # an empty store: nothing recorded, nothing lost

    def resumed(*overrides: str):
        given = [f"resume={tmp_path}", *overrides]
        return validate(resume_config(compose_config(given), given, validate))

    # resume= alone: the saved config (not the defaults the bare command line composes)
    assert config_record(resumed()) == saved
    # the original command again, or only keys that change no number the run produces
    assert config_record(resumed(*original)) == saved
    shown = resumed("trainer.progress=true", "trainer.transcripts_every=1", "trainer.checkpoint_every=5")
    assert shown.trainer.progress and shown.trainer.transcripts_every == 1 and shown.seed == 3
    assert shown.trainer.checkpoint_every == 5
    with pytest.raises(SystemExit, match=r"in 1 key\(s\): seed: saved 3, now 4$"):
        resumed(*original[:-2], "seed=4", "trainer.progress=false")
    with pytest.raises(SystemExit, match='algo.name: saved "grpo", now "gigpo"'):
        resumed("seed=3")  # a partial command line composes other values (here the default algo)
