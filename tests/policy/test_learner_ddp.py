"""Two CPU ranks (gloo, ddp_spawn): sharded updates keep the ranks' weights identical."""

import pytest
import torch
from lightning.fabric import Fabric

from experiments.distributed import launch_ranks
from policy.batch import TokenBatch
from policy.config import PPOConfig
from policy.learner import PPOLearner
from policy.logprobs import token_logprobs
from tests.policy.test_learner import tiny_lm


def four_turns() -> TokenBatch:
    """Four left-padded turns with two action tokens each, so both shards hold the same token count."""
    return TokenBatch(
        input_ids=torch.tensor([[0, 4, 5, 6, 3], [4, 5, 7, 8, 3], [0, 0, 9, 5, 3], [6, 7, 8, 4, 3]]),
        attention_mask=torch.tensor([[0, 1, 1, 1, 1], [1, 1, 1, 1, 1], [0, 0, 1, 1, 1], [1, 1, 1, 1, 1]]),
        response_mask=torch.tensor(
            [[0, 0, 0, 1, 1], [0, 0, 0, 1, 1], [0, 0, 0, 1, 1], [0, 0, 0, 1, 1]], dtype=torch.float
        ),
    )


ADVANTAGES = torch.tensor([[1.0], [-1.0], [0.5], [2.0]]) * four_turns().response_mask


def checksum(module: torch.nn.Module) -> torch.Tensor:
    """Per-parameter sums and squared sums, float64: differs if any rank's weights differ."""
    params = [p.detach().double() for p in module.parameters()]
    return torch.stack([t for p in params for t in (p.sum(), p.square().sum())])


def worker(fabric: Fabric) -> dict:
    torch.set_num_threads(1)
    batch, rank = four_turns(), fabric.global_rank
    shard = torch.tensor([2 * rank, 2 * rank + 1])  # rank 0: rows 0, 1; rank 1: rows 2, 3

    model = tiny_lm()
    start = checksum(model)
    learner = PPOLearner(fabric, model, PPOConfig(epochs=2, minibatch_size=1, lr=1e-2), seed=rank)
    stats = learner.update(batch.index(shard), ADVANTAGES[shard])
    sums = fabric.all_gather(checksum(learner.policy))  # (2, P)
    stats_everywhere = fabric.all_gather(torch.tensor(stats["losses/policy_loss"]))  # (2,)

    # lr 0, one step on each rank's shard: the averaged gradient is the full batch's token-mean gradient.
    grad_model = tiny_lm()
    grad_learner = PPOLearner(
        fabric, grad_model, PPOConfig(epochs=1, minibatch_size=2, lr=0.0, max_grad_norm=None), seed=0
    )
    grad_learner.update(batch.index(shard), ADVANTAGES[shard])
    grads = [p.grad.clone() for p in grad_model.parameters()]
    # The same with one-row micro-batches: the gradients are accumulated, then all-reduced once.
    micro_model = tiny_lm()
    micro_cfg = PPOConfig(epochs=1, minibatch_size=2, micro_batch_size=1, lr=0.0, max_grad_norm=None)
    PPOLearner(fabric, micro_model, micro_cfg, seed=0).update(batch.index(shard), ADVANTAGES[shard])
    # One number back (the results cross a pipe that the launcher reads only after the ranks end).
    micro_gap = max(float((p.grad - g).abs().max()) for p, g in zip(micro_model.parameters(), grads, strict=True))

    # Unequal shards (3 rows: two minibatches of 2; 2 rows: one): the smaller rank cuts its rows into two
    # minibatches of one, so both take two optimizer steps and stay in lockstep and identical.
    unequal = torch.tensor([0, 1, 2]) if rank == 0 else torch.tensor([2, 3])
    unequal_learner = PPOLearner(fabric, tiny_lm(), PPOConfig(epochs=1, minibatch_size=2, lr=1e-2), seed=rank)
    unequal_learner.update(batch.index(unequal), ADVANTAGES[unequal])
    adam_steps = [float(state["step"]) for state in unequal_learner.policy_optimizer.state.values()]
    unequal_steps = fabric.all_gather(torch.tensor(adam_steps))  # (2, P)
    unequal_sums = fabric.all_gather(checksum(unequal_learner.policy))  # (2, P)

    # A rank with fewer rows (1) than the steps the other needs (2) cannot keep up: both ranks refuse.
    uneven = torch.tensor([0]) if rank == 0 else torch.tensor([1, 2])
    try:
        learner.update(batch.index(uneven), ADVANTAGES[uneven], old_logp=torch.zeros(len(uneven), 5))
        refused = ""
    except ValueError as error:
        refused = str(error)
    refusals = fabric.all_gather(torch.tensor(len(refused)))
    # numpy, not tensors: tensors cross the return queue as shared memory that dies with this process.
    result = {"start": start, "sums": sums, "stats": stats_everywhere, "grads": grads, "micro_gap": torch.tensor(micro_gap), "refusals": refusals,
              "unequal_steps": unequal_steps, "unequal_sums": unequal_sums}
    result = {k: [t.numpy() for t in v] if isinstance(v, list) else v.numpy() for k, v in result.items()}
    return {**result, "refused": refused}


@pytest.mark.slow  # two spawned ranks: 15-35 s on 2 shared cores
def test_sharded_update_keeps_ranks_identical_and_averages_gradients():
    result = launch_ranks(Fabric(accelerator="cpu", devices=2, strategy="ddp_spawn"), worker)
    sums = torch.from_numpy(result["sums"])
    assert torch.equal(sums[0], sums[1])
    assert not torch.allclose(sums[0], torch.from_numpy(result["start"]))  # the update did move the weights
    assert result["stats"][0] == result["stats"][1]  # metrics are averaged over ranks

    batch = four_turns()
    model = tiny_lm()
    logp, _ = token_logprobs(model, batch.input_ids, batch.attention_mask)
    old_logp = logp.detach()
    mask = batch.response_mask
    ratio = torch.exp(logp - old_logp)
    (-(ADVANTAGES * ratio * mask).sum() / mask.sum()).backward()
    for ddp_grad, p in zip(result["grads"], model.parameters(), strict=True):
        assert torch.allclose(torch.from_numpy(ddp_grad), p.grad, atol=1e-6)
    assert result["micro_gap"] < 1e-6  # one-row micro-batches accumulate to the same all-reduced gradient

    assert (result["unequal_steps"] == 2).all()  # every parameter of both ranks took exactly two Adam steps
    unequal_sums = torch.from_numpy(result["unequal_sums"])
    assert torch.equal(unequal_sums[0], unequal_sums[1])

    assert "different numbers of minibatches" in result["refused"]
    assert (result["refusals"] > 0).all()
