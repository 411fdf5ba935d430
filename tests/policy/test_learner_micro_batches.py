"""Micro-batches with gradient accumulation: the same step as the whole minibatch in one pass.

The reference is the learner's whole-minibatch path (``micro_batch_size=None``), which the other learner
tests check against hand formulas; the shares that make the two agree are checked by hand in
``test_micro_batches.py``.
"""

import copy
from types import SimpleNamespace

import pytest
import torch

from critic import CriticStates
from policy.batch import TokenBatch
from policy.config import AGG_MODES, PPOConfig
from policy.learner import PPOLearner
from policy.value_targets import ValueTargets
from tests.policy.test_learner import compute_old_logp, fabric, hand_batch, tiny_critic, tiny_lm


def five_rows() -> TokenBatch:
    """``hand_batch`` (2, 3, 2 and 2 response tokens) and a fifth row with none, so the token, sequence and
    row denominators all differ."""
    batch = hand_batch()
    return TokenBatch(
        input_ids=torch.cat([batch.input_ids, torch.tensor([[0, 0, 4, 6, 7, 3]])]),
        attention_mask=torch.cat([batch.attention_mask, torch.tensor([[0, 0, 1, 1, 1, 1]])]),
        response_mask=torch.cat([batch.response_mask, torch.zeros(1, 6)]),
    )


def states_of(batch: TokenBatch) -> CriticStates:
    """The state before each row's turn: its ids up to the first response column (all of a row without one)."""
    width = batch.input_ids.shape[1]
    first = [int(r.nonzero()[0]) if r.any() else width for r in batch.response_mask]
    cut = max(first)
    ids = torch.stack([torch.cat([torch.zeros(cut - f, dtype=torch.long), batch.input_ids[b, :f]])
                       for b, f in enumerate(first)])
    mask = torch.stack([torch.cat([torch.zeros(cut - f, dtype=torch.long), batch.attention_mask[b, :f]])
                        for b, f in enumerate(first)])
    return CriticStates(ids, mask)


RETURNS = torch.tensor([1.0, 0.0, 0.5, 1.0, 0.25])
ADVANTAGES = five_rows().response_mask * torch.tensor([[1.0], [-1.0], [0.5], [2.0], [1.0]])
WEIGHTS = torch.tensor([1.0, 0.5, 0.0, 1.5, 2.0])
OLD_VALUE_SHIFT = torch.tensor([-0.5, -0.05, 0.0, 0.05, 0.5])  # rows 0 and 4 beyond the value clip, the rest in


def value_targets(learner: PPOLearner, batch: TokenBatch, level: str) -> ValueTargets:
    states = states_of(batch)
    if level == "token":
        returns = batch.response_mask * RETURNS.unsqueeze(1)  # (B, L)
        shift = batch.response_mask * OLD_VALUE_SHIFT.unsqueeze(1)  # (B, L)
        return ValueTargets("token", returns, old_values=learner.critic_token_values(batch, 5) + shift)
    if level == "turn":
        return ValueTargets("turn", RETURNS, old_values=learner.critic_values(states, 5) + OLD_VALUE_SHIFT,
                            states=states)
    return ValueTargets("sequence", RETURNS, states=states, mask=torch.tensor([1.0, 1.0, 0.0, 1.0, 1.0]))


def one_update(agg: str, level: str, micro_batch_size: int | None):
    """One update of one minibatch (all five rows) with weights, a KL reference, an entropy bonus and a
    critic; old log-probs off the current ones so that some ratios clip; a tight gradient clip."""
    batch = five_rows()
    cfg = PPOConfig(
        epochs=1, minibatch_size=64, micro_batch_size=micro_batch_size, lr=1e-4, value_lr=1e-4, loss_agg=agg,
        loss_scale_factor=6.0 if agg == "seq-mean-token-sum-norm" else None, kl_coef=0.1, entropy_coef=0.01,
        max_grad_norm=0.05,
    )
    policy = tiny_lm()
    noise = 0.5 * torch.randn(batch.input_ids.shape, generator=torch.Generator().manual_seed(7))  # (B, L)
    noise = noise - 0.3 * ADVANTAGES.sign()  # ratios pushed out of the clip range in the advantage's direction
    old_logp = compute_old_logp(policy, batch) + noise
    learner = PPOLearner(fabric(), policy, cfg, seed=0, critic=tiny_critic(), ref_model=tiny_lm(seed=1))
    metrics = learner.update(batch, ADVANTAGES, old_logp=old_logp, weights=WEIGHTS,
                             value=value_targets(learner, batch, level))
    models = (learner.policy, learner.critic)
    params = [p.detach().clone() for m in models for p in m.parameters()]
    grads = [p.grad.clone() for m in models for p in m.parameters()]  # after the clip
    return params, grads, metrics


@pytest.mark.parametrize("micro_batch_size", [1, 2])
@pytest.mark.parametrize("level", ["token", "turn", "sequence"])
@pytest.mark.parametrize("agg", AGG_MODES)
def test_micro_batches_take_the_whole_minibatch_step(agg, level, micro_batch_size):
    params, grads, metrics = one_update(agg, level, None)
    micro_params, micro_grads, micro_metrics = one_update(agg, level, micro_batch_size)
    assert metrics["losses/grad_norm"] > 0.05  # the clip acts, once, on the accumulated gradient
    assert metrics["losses/clipfrac"] > 0.0 and metrics["losses/kl_ref"] != 0.0
    assert metrics["losses/value_grad_norm"] > 0.05
    if level != "sequence":
        assert 0.0 < metrics["losses/value_clipfrac"] < 1.0
    for grad, micro_grad in zip(grads, micro_grads, strict=True):
        assert torch.allclose(grad, micro_grad, rtol=1e-5, atol=1e-7)
    for param, micro_param in zip(params, micro_params, strict=True):
        assert torch.allclose(param, micro_param, rtol=0.0, atol=1e-6)
    assert set(micro_metrics) == set(metrics)
    for key, value in metrics.items():
        assert micro_metrics[key] == pytest.approx(value, rel=1e-5, abs=1e-6), key


def test_a_micro_batch_as_large_as_the_minibatch_is_the_whole_minibatch_bit_for_bit():
    params, grads, metrics = one_update("token-mean", "turn", None)
    same_params, same_grads, same_metrics = one_update("token-mean", "turn", 5)
    assert metrics == same_metrics
    assert all(torch.equal(a, b) for a, b in zip(params + grads, same_params + same_grads, strict=True))


class ShapeSensitiveLM(torch.nn.Module):
    """``tiny_lm`` with the EOS logit moved by the shape of the rows it is given: its log-probs differ
    whenever two passes cut the rows into different batches or trim them to different widths."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = tiny_lm()

    def forward(self, input_ids, **kwargs):
        logits = self.inner(input_ids=input_ids, **kwargs).logits  # (b, L, V)
        rows, width = input_ids.shape
        shift = torch.zeros(logits.shape[-1])
        shift[3] = 0.01 * rows + 0.1 * width  # token 3 is EOS, the last action token of every row
        return SimpleNamespace(logits=logits + shift)


@pytest.mark.parametrize("micro_batch_size", [1, 2])
def test_first_epoch_ratios_and_kl_to_a_copy_are_exactly_one_and_zero_with_micro_batches(micro_batch_size):
    batch = five_rows()
    policy = ShapeSensitiveLM()
    cfg = PPOConfig(epochs=1, minibatch_size=5, micro_batch_size=micro_batch_size, lr=0.0, kl_coef=0.1)
    learner = PPOLearner(fabric(), policy, cfg, seed=0, ref_model=copy.deepcopy(policy))
    stats = learner.update(batch, ADVANTAGES)  # old and reference log-probs computed by the learner
    assert stats["losses/approx_kl"] == 0.0 and stats["losses/clipfrac"] == 0.0
    assert stats["losses/kl_ref"] == 0.0
    # The whole minibatch's log-probs (other rows per pass, other widths) are not the micro-batches'.
    whole = PPOLearner(fabric(), copy.deepcopy(policy), PPOConfig(epochs=1, minibatch_size=5), seed=0)
    assert learner.update(batch, ADVANTAGES, old_logp=whole.old_logprobs(batch, 5))["losses/approx_kl"] != 0.0


def test_micro_batch_size_must_be_at_least_one():
    with pytest.raises(ValueError, match="PPOConfig.micro_batch_size must be an integer >= 1 or None"):
        PPOConfig(micro_batch_size=0)
    assert PPOConfig(micro_batch_size=1).micro_batch_size == 1
    assert PPOConfig().micro_batch_size is None
