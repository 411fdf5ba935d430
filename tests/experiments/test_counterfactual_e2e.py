"""``algo=counterfactual_gigpo`` end to end in a subprocess: learning_check, a tiny world model, 3 iterations."""

from __future__ import annotations

import pytest

from tests.experiments.test_imagination_e2e import SMALL_WORLD_MODEL
from tests.experiments.test_train_e2e import assert_ok, read_records, run_train

pytestmark = pytest.mark.slow

STEP_GROUP_RUN = [  # the tiny step-group run, shared with the real-branch oracle's test
    "experiment=learning_check",
    "trainer.iterations=3",
    "trainer.groups_per_iteration=2",
    "trainer.group_size=4",
    "trainer.eval_episodes=8",
    "trainer.eval_every=3",
    "trainer.warm_start.max_steps=5",
    "trainer.warm_start.expert_episodes=16",
    "trainer.warm_start.eval_every=5",
    "trainer.warm_start.eval_episodes=8",
    "trainer.progress=false",
    "critic.latent.latent_size=16",
    "critic.latent.embed_size=16",
    "critic.latent.feature_size=16",
    "critic.latent.head_hidden_size=16",
    "algo.counterfactual.siblings=3",
    "algo.counterfactual.critic_fit_steps=3",
]
RUN = ["algo=counterfactual_gigpo", *STEP_GROUP_RUN, *SMALL_WORLD_MODEL]


def test_counterfactual_gigpo_runs_with_siblings_in_the_gradient(tmp_path):
    result = run_train(*RUN, "algo.counterfactual.siblings_in_gradient=true", f"hydra.run.dir={tmp_path}")
    assert_ok(result)
    records = read_records(tmp_path)[1:]
    assert len(records) == 3
    for record in records:
        real_rows = record["charts/real_env_steps"] - (
            records[records.index(record) - 1]["charts/real_env_steps"] if records.index(record) else 0
        )
        # One group per real step, each of the real action and 3 siblings, all 3 siblings trained.
        assert record["counterfactual/groups"] == real_rows
        assert record["counterfactual/sibling_rows"] == 3 * real_rows
        assert record["counterfactual/fallback_share"] == 0.0
        assert 0.0 <= record["counterfactual/nonzero_step_share"] <= 1.0
        assert record["counterfactual/critic_loss"] >= 0.0
    assert (tmp_path / "models" / "world_model" / "model.safetensors").exists()
