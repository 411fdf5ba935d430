"""``algo.ppo.old_logp=sampling``: the log-probs recorded while sampling are the learner's old log-probs.

The training loop hands ``RolloutBatch.sampling_logp`` to the update instead of a recomputing pass.
That is right only when every trained row was sampled by the policy as it stands at the update, in
the learner's precision. The runs below spy on the update of every batch builder (real rows, imagined
rows, counterfactual siblings from the world model or the real env, a critic's batch) and compare the
log-probs it is given with those the learner computes on the same batch, on CPU in fp32.
"""

from __future__ import annotations

import pytest
import torch

from policy.learner import PPOLearner
from tests.experiments.in_process import compose_config, train_in_process
from tests.experiments.test_determinism import BASE, MODEL_BASED, SMALL_LATENT_CRITIC, SMALL_WORLD_MODEL
from tests.experiments.test_train_e2e import read_records

pytestmark = pytest.mark.slow

CASES = {
    "model_based_grpo": ["algo=grpo", *MODEL_BASED],
    "counterfactual_siblings": [
        "algo=counterfactual_gigpo",
        "algo.counterfactual.siblings_in_gradient=true",
        "imagination.gate_threshold=0",
        *SMALL_WORLD_MODEL,
        *SMALL_LATENT_CRITIC,
    ],
    "real_branch_siblings": [
        "algo=real_branch_gigpo",
        "algo.counterfactual.siblings_in_gradient=true",
        *SMALL_LATENT_CRITIC,
    ],
    "ppo_turn": ["algo=ppo_turn"],
}


@pytest.mark.parametrize("case", list(CASES))
def test_sampling_log_probs_are_the_learners_old_log_probs(tmp_path, monkeypatch, case):
    seen = []
    update = PPOLearner.update

    def spy(self, batch, advantages, **kwargs):
        old_logp = kwargs["old_logp"]
        assert old_logp is not None, (
            "algo.ppo.old_logp=sampling must hand the sampling log-probs to the update"
        )
        recomputed = self.old_logprobs(batch, 64)  # (B, L) under the learner's module, before it steps
        response = batch.response_mask.bool()
        assert bool((old_logp[~response] == 0).all())  # recorded on the sampled action ids only
        torch.testing.assert_close(old_logp[response], recomputed[response], atol=1e-5, rtol=0)
        seen.append(int(response.sum()))
        return update(self, batch, advantages, **kwargs)

    monkeypatch.setattr(PPOLearner, "update", spy)
    train_in_process([*BASE, *CASES[case]], tmp_path)
    assert len(seen) == 2 and min(seen) > 0  # both iterations' updates were checked
    records = read_records(tmp_path)[1:]
    if case == "model_based_grpo":  # imagined rows were in the batches
        assert sum(r["imagination/imagined_groups"] for r in records) > 0
    if case.endswith("_siblings"):  # and sibling rows, sampled inside the world model or the real env
        assert sum(r["counterfactual/sibling_rows"] for r in records) > 0


def test_bad_old_logp_value_fails_naming_the_key():
    from experiments.config import validate

    with pytest.raises(ValueError, match="PPOConfig.old_logp must be one of"):
        validate(compose_config([*BASE, "algo.ppo.old_logp=cached"]))


def test_sampling_log_probs_are_refused_under_mixed_precision(tmp_path):
    with pytest.raises(ValueError, match="algo.ppo.old_logp=sampling needs full precision"):
        train_in_process([*BASE, "algo=grpo", "trainer.precision=bf16-mixed"], tmp_path)
