"""The LM head applied only at the scored positions gives the full-vocabulary log-probs there."""

from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from policy.logprobs import scored_token_logprobs

VOCAB = 40


def tiny_lm() -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32)
    return LlamaForCausalLM(config).eval()


def left_padded_batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Three rows of different lengths, left-padded; the scored (response) tokens end each row."""
    attention = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 1, 1, 1, 1]])
    response = torch.tensor([[0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 0, 1, 1], [0, 0, 0, 0, 0, 1, 1, 1]])
    ids = torch.randint(3, VOCAB, attention.shape, generator=torch.Generator().manual_seed(1)) * attention
    return ids, attention, response.float()


def full_vocabulary_reference(model, ids, attention) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, L, V) logits of every position, one row at a time without its padding; log-softmax by hand.
    Entry [b, t] scores token t from the logits at t - 1."""
    logp = torch.zeros(ids.shape, dtype=torch.float64)
    entropy = torch.zeros(ids.shape, dtype=torch.float64)
    for b in range(ids.shape[0]):
        start = int((attention[b] == 0).sum())
        row = ids[b, start:].unsqueeze(0)
        with torch.no_grad():
            logits = model(input_ids=row).logits[0].double()  # (L - start, V)
        log_z = torch.log(torch.exp(logits - logits.max(-1, keepdim=True).values).sum(-1)) + logits.max(-1).values
        log_probs = logits - log_z.unsqueeze(-1)  # (L - start, V)
        for t in range(1, row.shape[1]):
            logp[b, start + t] = log_probs[t - 1, row[0, t]]
            entropy[b, start + t] = -(log_probs[t - 1].exp() * log_probs[t - 1]).sum()
    return logp, entropy


def test_scored_logprobs_equal_the_full_vocabulary_ones_at_the_scored_tokens():
    model = tiny_lm()
    ids, attention, response = left_padded_batch()
    with torch.no_grad():
        logp, entropy = scored_token_logprobs(model, ids, attention, response)
    expected_logp, expected_entropy = full_vocabulary_reference(model, ids, attention)
    scored = response.bool()
    assert logp.shape == ids.shape and entropy.shape == ids.shape
    torch.testing.assert_close(logp[scored].double(), expected_logp[scored], atol=1e-6, rtol=0)
    torch.testing.assert_close(entropy[scored].double(), expected_entropy[scored], atol=1e-6, rtol=0)
    assert (logp[~scored] == 0).all() and (entropy[~scored] == 0).all()  # nothing is computed there


def test_the_lm_head_sees_only_the_positions_that_predict_scored_tokens():
    model = tiny_lm()
    ids, attention, response = left_padded_batch()
    seen = []
    model.lm_head.register_forward_hook(lambda module, inputs, output: seen.append(inputs[0].shape))
    with torch.no_grad():
        scored_token_logprobs(model, ids, attention, response)
    # Scored tokens sit in columns 5-7, 6-7 and 5-7, so they are predicted from columns 4-6, 5-6 and 4-6:
    # the head sees those 3 columns of the 3 rows (B, C, D), not all 8 positions of each row.
    assert seen == [torch.Size([3, 3, 16])]


def test_gradients_flow_through_the_scored_logprobs():
    model = tiny_lm()
    ids, attention, response = left_padded_batch()
    logp, _ = scored_token_logprobs(model, ids, attention, response)
    logp.sum().backward()
    assert model.lm_head.weight.grad is not None and model.lm_head.weight.grad.abs().sum() > 0


def test_the_learner_with_scored_logits_applies_the_head_at_the_scored_positions_only_and_updates_alike():
    import copy

    from lightning.fabric import Fabric

    from policy.batch import TokenBatch
    from policy.learner import PPOConfig, PPOLearner

    ids, attention, response = left_padded_batch()
    tokens = TokenBatch(ids, attention, response)
    advantages = response * torch.tensor([[1.0], [-0.5], [2.0]])  # (B, L)
    cfg = PPOConfig(epochs=2, minibatch_size=2, kl_coef=0.2, entropy_coef=0.01, max_grad_norm=None, lr=1e-2)
    results = {}
    for scored in (False, True):
        model = tiny_lm().train()
        seen = []
        model.lm_head.register_forward_hook(lambda module, inputs, output, seen=seen: seen.append(inputs[0].shape[1]))
        learner = PPOLearner(Fabric(accelerator="cpu", devices=1), model, cfg, seed=0,
                             ref_model=copy.deepcopy(tiny_lm()), scored_logits=scored)
        metrics = learner.update(tokens, advantages)  # old log-probs recomputed: that pass too
        results[scored] = (metrics, {n: p.detach().clone() for n, p in model.named_parameters()}, seen)
    (full_metrics, full_weights, full_seen), (metrics, weights, seen) = results[False], results[True]
    # (b, L, D) hidden states of every position (8, or 6 once a minibatch's shared left padding is cut) vs
    # (b, C, D) of the columns predicting a scored token: 4-6 with rows 0 or 2, 5-6 for row 1 alone
    assert set(full_seen) <= {6, 8} and set(seen) <= {2, 3}
    for key in ("losses/policy_loss", "losses/approx_kl", "losses/kl_ref", "losses/entropy", "losses/grad_norm"):
        assert abs(metrics[key] - full_metrics[key]) < 1e-5, key
    for name, weight in weights.items():
        torch.testing.assert_close(weight, full_weights[name], atol=1e-5, rtol=0)
