"""The training loop on a CUDA device, where one is present (skipped elsewhere; CI has none).

Everything the update compares must sit on the Fabric device: the rollout batch, old and reference
log-probs, critic values and bootstrap states.
"""

import pytest
import torch

from tests.experiments.test_train_e2e import TINY, assert_ok, read_records, run_train

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.mark.parametrize("algo", ["ppo_turn", "grpo"])
def test_train_runs_on_cuda_in_bf16(tmp_path, algo):
    run_dir = tmp_path / algo
    result = run_train(*TINY, f"algo={algo}", "trainer.accelerator=cuda", "trainer.precision=bf16-mixed",
                       "algo.ppo.old_logp=recompute",  # sampling runs outside the learner's autocast
                       "algo.ppo.kl_coef=0.01", f"hydra.run.dir={run_dir}")
    assert_ok(result)
    records = read_records(run_dir)
    assert all(r["losses/grad_norm"] >= 0 for r in records[1:])


def test_first_epoch_ratio_is_exactly_one_on_cuda_in_bf16():
    from lightning.fabric import Fabric

    from policy.config import PPOConfig
    from policy.learner import PPOLearner
    from tests.policy.test_learner import hand_batch, tiny_lm

    batch = hand_batch()
    advantages = batch.response_mask * torch.tensor([[1.0], [-1.0], [0.5], [2.0]])
    fabric = Fabric(accelerator="cuda", devices=1, precision="bf16-mixed")
    learner = PPOLearner(fabric, tiny_lm(), PPOConfig(epochs=1, minibatch_size=2, lr=0.0), seed=0)
    stats = learner.update(batch, advantages)
    assert stats["losses/approx_kl"] == 0.0 and stats["losses/clipfrac"] == 0.0
