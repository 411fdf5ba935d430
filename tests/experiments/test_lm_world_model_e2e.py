"""The model-based loop end to end with ``world_model=lm``: it runs, imagines, and saves a loadable LM model."""

from __future__ import annotations

import pytest

from tests.experiments.test_train_e2e import TINY, assert_ok, finish, read_records, start_train
from world_model.lm import LMWorldModel
from world_model.loading import load_world_model

pytestmark = pytest.mark.slow

SMALL_LM = [
    "world_model=lm", "world_model.num_members=2", "world_model.lm.hidden_size=16", "world_model.lm.num_heads=2",
    "world_model.lm.intermediate_size=32", "world_model.lm.num_layers=1", "world_model.lm.history_turns=2",
    "imagination.first_fit_steps=3", "imagination.fit_steps=2",
]


def test_the_loop_runs_with_the_lm_world_model(tmp_path):
    run_dir = tmp_path / "lm"
    result = finish(start_train(*TINY, "algo=grpo", "trainer.iterations=2", "trainer.groups_per_iteration=4",
                                *SMALL_LM, "imagination=dyna", "imagination.ratio=0.5", "imagination.gate_threshold=0",
                                f"hydra.run.dir={run_dir}"))
    assert_ok(result)
    records = read_records(run_dir)[1:]
    assert [r["imagination/imagined_groups"] for r in records] == [2.0, 2.0]
    assert all(r["charts/imagined_env_steps"] > 0 for r in records)
    assert all("wm/one_step_exact_match" in r for r in records)
    model = load_world_model(run_dir / "models" / "world_model")
    assert isinstance(model, LMWorldModel) and model.config.num_members == 2
