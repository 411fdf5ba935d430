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


CUDA_BF16 = ["trainer.accelerator=cuda", "trainer.precision=bf16-mixed",
             "algo.ppo.old_logp=recompute"]  # sampling runs outside the learner's autocast


@pytest.mark.parametrize("kind", ["latent", "lm"])
def test_model_based_run_fits_and_imagines_on_cuda(tmp_path, kind):
    from tests.experiments.test_imagination_e2e import BASE, SMALL_WORLD_MODEL
    from tests.experiments.test_lm_world_model_e2e import SMALL_LM

    run_dir = tmp_path / kind
    model = SMALL_WORLD_MODEL if kind == "latent" else SMALL_LM
    result = run_train(*BASE, *model, *CUDA_BF16, "imagination=dyna", "imagination.ratio=0.5",
                       "imagination.gate_threshold=0", f"hydra.run.dir={run_dir}")
    assert_ok(result)
    records = read_records(run_dir)[1:]
    assert all(r["imagination/imagined_groups"] == 2.0 for r in records)  # 4 groups at ratio 0.5, gate open
    assert all(r["charts/imagined_env_steps"] > 0 for r in records)


def test_the_latent_world_model_fits_on_the_gpu_and_stays_there():
    from tests.world_model.conftest import hidden_number_trajectories, tiny_model
    from world_model import TurnTokenizer
    from world_model.lightning_module import fit_world_model

    model = tiny_model(TurnTokenizer.for_env("hidden_number"), seed=0).to("cuda")
    before = [p.detach().clone() for p in model.parameters()]
    metrics = fit_world_model(hidden_number_trajectories(seed=0, groups=4), [], model, max_steps=3, batch_size=8)
    assert metrics["steps"] == 3
    assert all(p.is_cuda for p in model.parameters())  # Lightning's teardown moves it to the CPU; the fit moves it back
    assert any(not torch.equal(b, p) for b, p in zip(before, model.parameters(), strict=True))


def test_scored_logits_on_cuda_equal_the_full_computation():
    # The scored path hands the model a 1-D logits_to_keep index, which the machine's transformers must read.
    from policy.logprobs import scored_token_logprobs, token_logprobs
    from tests.policy.test_scored_logprobs import left_padded_batch, tiny_lm

    model = tiny_lm().to("cuda")
    ids, attention, response = (t.to("cuda") for t in left_padded_batch())
    with torch.no_grad():
        logp, entropy = scored_token_logprobs(model, ids, attention, response)
        full_logp, full_entropy = token_logprobs(model, ids, attention)
    scored = response.bool()
    torch.testing.assert_close(logp[scored], full_logp[scored], atol=1e-5, rtol=0)
    torch.testing.assert_close(entropy[scored], full_entropy[scored], atol=1e-5, rtol=0)
