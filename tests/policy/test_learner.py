import copy

import pytest
import torch
from lightning.fabric import Fabric
from transformers import LlamaConfig, LlamaForCausalLM

from critic import CriticStates, TokenCritic, TokenCriticConfig, token_values
from policy.batch import TokenBatch
from policy.config import PPOConfig
from policy.learner import PPOLearner
from policy.logprobs import token_logprobs
from policy.value_targets import ValueTargets

VOCAB = 11


def tiny_lm(seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=32,
    )
    return LlamaForCausalLM(config)


def fabric(precision: str = "32-true") -> Fabric:
    return Fabric(accelerator="cpu", devices=1, precision=precision)


def compute_old_logp(model, batch, chunk_size=4) -> torch.Tensor:
    """Log-probs of ``batch`` under ``model`` as they stand, without a learner."""
    with torch.no_grad():
        return token_logprobs(model, batch.input_ids, batch.attention_mask)[0]


def make_learner(model, cfg, seed=0, **kwargs) -> PPOLearner:
    return PPOLearner(fabric(), model, cfg, seed=seed, **kwargs)


def hand_batch() -> TokenBatch:
    """Four left-padded turns; 3 is EOS; actions are the last 2-3 columns."""
    return TokenBatch(
        input_ids=torch.tensor(
            [
                [0, 0, 4, 5, 6, 3],
                [4, 5, 6, 7, 8, 3],
                [0, 4, 7, 9, 5, 3],
                [0, 0, 0, 5, 8, 3],
            ]
        ),
        attention_mask=torch.tensor(
            [
                [0, 0, 1, 1, 1, 1],
                [1, 1, 1, 1, 1, 1],
                [0, 1, 1, 1, 1, 1],
                [0, 0, 0, 1, 1, 1],
            ]
        ),
        response_mask=torch.tensor(
            [
                [0, 0, 0, 0, 1, 1],
                [0, 0, 0, 1, 1, 1],
                [0, 0, 0, 0, 1, 1],
                [0, 0, 0, 0, 1, 1],
            ],
            dtype=torch.float,
        ),
    )


def one_step_cfg(**overrides) -> PPOConfig:
    """One epoch, one minibatch, no gradient clipping."""
    return PPOConfig(**{"epochs": 1, "minibatch_size": 64, "max_grad_norm": None, **overrides})


def grads_of(module: torch.nn.Module) -> list[torch.Tensor]:
    return [p.grad.clone() for p in module.parameters()]


def masked_logp_sum(model, batch, where) -> float:
    with torch.no_grad():
        logp, _ = token_logprobs(model, batch.input_ids, batch.attention_mask)
    return float((logp * where).sum())


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_update_moves_logp_of_advantaged_tokens_in_the_sign_of_the_advantage(sign):
    batch = hand_batch()
    model = tiny_lm()
    before_params = [p.detach().clone() for p in model.parameters()]
    where = torch.zeros_like(batch.response_mask)
    where[0, 4:] = 1.0  # row 0's action and EOS
    where[2, 5] = 1.0  # row 2's EOS only
    before = masked_logp_sum(model, batch, where)
    old_logp = compute_old_logp(model, batch, chunk_size=4)
    learner = make_learner(model, one_step_cfg(lr=1e-2))
    learner.update(batch, sign * where, old_logp=old_logp)
    after = masked_logp_sum(learner.policy, batch, where)
    assert (after - before) * sign > 0.05
    assert any(not torch.equal(a, b) for a, b in zip(before_params, model.parameters(), strict=True))


def test_masked_columns_get_no_gradient():
    batch = hand_batch()
    model = tiny_lm()
    old_logp = compute_old_logp(model, batch, chunk_size=4)
    advantages = torch.randn(4, 6, generator=torch.Generator().manual_seed(1)) * batch.response_mask
    cfg = one_step_cfg(lr=0.0)  # lr 0: parameters stay, .grad keeps the step's gradient
    learner = make_learner(model, cfg)
    stats = learner.update(batch, advantages, old_logp=old_logp)
    reference = grads_of(model)

    off = batch.response_mask == 0
    altered = TokenBatch(
        input_ids=torch.where(
            batch.attention_mask == 0, torch.full_like(batch.input_ids, 9), batch.input_ids
        ),
        attention_mask=batch.attention_mask,
        response_mask=batch.response_mask,
    )
    altered_adv = torch.where(off, torch.full_like(advantages, 100.0), advantages)
    altered_old = torch.where(off, torch.full_like(old_logp, -50.0), old_logp)
    altered_stats = learner.update(altered, altered_adv, old_logp=altered_old)
    assert altered_stats["losses/policy_loss"] == pytest.approx(stats["losses/policy_loss"], abs=1e-7)
    for g, h in zip(reference, grads_of(model), strict=True):
        assert torch.allclose(g, h, atol=1e-7)
    assert any(g.abs().sum() > 0 for g in reference)


def test_first_step_gradient_equals_hand_policy_gradient():
    batch = hand_batch()
    model = tiny_lm()
    by_hand = copy.deepcopy(model)
    advantages = torch.tensor(
        [
            [0, 0, 0, 0, 1.5, -0.5],
            [0, 0, 0, 2.0, 0.3, -1.0],
            [0, 0, 0, 0, -2.0, 0.7],
            [0, 0, 0, 0, 0.4, 1.1],
        ]
    )
    old_logp = compute_old_logp(model, batch, chunk_size=3)
    learner = make_learner(model, one_step_cfg(lr=0.0))
    stats = learner.update(batch, advantages, old_logp=old_logp)
    assert stats["losses/clipfrac"] == 0.0 and stats["losses/approx_kl"] == pytest.approx(0.0, abs=1e-7)

    mask = batch.response_mask
    logp, _ = token_logprobs(by_hand, batch.input_ids, batch.attention_mask)
    hand_loss = -(advantages * logp * mask).sum() / mask.sum()  # token-mean over the 9 action tokens
    hand_loss.backward()
    assert stats["losses/policy_loss"] == pytest.approx(
        -(advantages.sum() / 9).item(), abs=1e-6
    )  # ratio 1: -mean(A)
    for g, h in zip(grads_of(model), grads_of(by_hand), strict=True):
        assert torch.allclose(g, h, atol=1e-6)


def test_zero_weight_row_has_no_influence():
    batch = hand_batch()
    model = tiny_lm()
    old_logp = compute_old_logp(model, batch, chunk_size=4)
    advantages = batch.response_mask.clone()
    learner = make_learner(model, one_step_cfg(lr=0.0))
    weights = torch.tensor([1.0, 1.0, 1.0, 0.0])

    learner.update(batch, advantages, old_logp=old_logp, weights=weights)
    weighted = grads_of(model)
    flipped = advantages.clone()
    flipped[3] *= -7.0  # row 3's advantages change completely
    learner.update(batch, flipped, old_logp=old_logp, weights=weights)
    for g, h in zip(weighted, grads_of(model), strict=True):
        assert torch.allclose(g, h, atol=1e-7)
    learner.update(batch, flipped, old_logp=old_logp)  # without weights row 3 counts again
    assert any(not torch.allclose(g, h, atol=1e-6) for g, h in zip(weighted, grads_of(model), strict=True))


def params_after(seed: int, model: torch.nn.Module) -> list[torch.Tensor]:
    batch = hand_batch()
    advantages = batch.response_mask * torch.tensor([[1.0], [-1.0], [0.5], [2.0]])
    old_logp = compute_old_logp(model, batch, chunk_size=4)
    learner = make_learner(model, PPOConfig(epochs=2, minibatch_size=2, lr=1e-2, length_buckets=1), seed=seed)
    torch.manual_seed(seed * 1000 + 17)  # the global RNG must not matter
    learner.update(batch, advantages, old_logp=old_logp)
    return [p.detach().clone() for p in model.parameters()]


def test_same_seed_gives_same_parameters():
    base = tiny_lm()
    first = params_after(0, copy.deepcopy(base))
    second = params_after(0, copy.deepcopy(base))
    other = params_after(1, copy.deepcopy(base))
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))
    assert any(not torch.equal(a, b) for a, b in zip(first, other, strict=True))


def test_kl_to_a_copy_of_the_policy_starts_at_zero():
    batch = hand_batch()
    model = tiny_lm()
    ref = copy.deepcopy(model)
    ref_before = [p.detach().clone() for p in ref.parameters()]
    old_logp = compute_old_logp(model, batch, chunk_size=4)
    advantages = batch.response_mask.clone()
    learner = make_learner(model, one_step_cfg(lr=1e-2, kl_coef=0.5, kl_kind="k3"), ref_model=ref)
    first = learner.update(batch, advantages, old_logp=old_logp)
    assert first["losses/kl_ref"] == 0.0
    second = learner.update(batch, advantages)
    assert second["losses/kl_ref"] > 0.0
    assert all(torch.equal(a, b) for a, b in zip(ref_before, ref.parameters(), strict=True))
    assert not any(p.requires_grad for p in ref.parameters())


def test_kl_coef_without_reference_is_rejected():
    with pytest.raises(ValueError, match="kl_coef > 0 needs a ref_model"):
        make_learner(tiny_lm(), PPOConfig(kl_coef=0.1))


def tiny_critic(seed: int = 3) -> TokenCritic:
    return TokenCritic(TokenCriticConfig(vocab_size=VOCAB, hidden_size=32), seed=seed)


def prompt_states(batch: TokenBatch) -> CriticStates:
    """The state before each hand_batch row's turn: its ids up to the first response column."""
    first = batch.response_mask.argmax(dim=1)  # (B,)
    width = int(first.max())
    rows = [batch.input_ids[b, : int(first[b])].tolist() for b in range(len(batch))]
    masks = [batch.attention_mask[b, : int(first[b])].tolist() for b in range(len(batch))]
    ids = torch.tensor([[0] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(m)) + m for m in masks])
    return CriticStates(ids, mask)


TURN_RETURNS = torch.tensor([1.0, -1.0, 0.5, 2.0])


@pytest.mark.parametrize("level", ["token", "turn", "sequence"])
def test_value_loss_decreases_toward_fixed_returns(level):
    batch = hand_batch()
    # Plain shuffled minibatches: four rows would be one length-sorted bucket, the same pairs every epoch.
    cfg = PPOConfig(epochs=2, minibatch_size=2, lr=0.0, value_lr=1e-2, length_buckets=0)
    learner = make_learner(tiny_lm(), cfg, critic=tiny_critic())
    states = prompt_states(batch)

    def targets() -> ValueTargets:
        if level == "token":
            returns = batch.response_mask * TURN_RETURNS.unsqueeze(1)  # (B, L)
            return ValueTargets("token", returns, old_values=learner.critic_token_values(batch, 4))
        if level == "turn":
            return ValueTargets("turn", TURN_RETURNS, old_values=learner.critic_values(states, 4), states=states)
        return ValueTargets("sequence", torch.tensor([1.0, 0.0, 1.0, 1.0]), states=states,
                            mask=torch.tensor([1.0, 1.0, 0.0, 1.0]))

    history = [learner.update(batch, torch.zeros(4, 6), value=targets()) for _ in range(8)]
    losses = [h["losses/value_loss"] for h in history]
    assert losses[-1] < 0.6 * losses[0]
    if level != "sequence":
        assert history[-1]["losses/explained_variance"] > history[0]["losses/explained_variance"]
    expected_keys = {
        "losses/policy_loss", "losses/value_loss", "losses/approx_kl", "losses/clipfrac", "losses/entropy",
        "losses/grad_norm", "losses/value_grad_norm", "losses/clipfrac_lower",
        "losses/nonfinite_steps",
    }
    if level != "sequence":
        expected_keys |= {"losses/explained_variance", "losses/value_clipfrac"}
    assert set(history[0]) == expected_keys


def test_sequence_value_loss_ignores_unmasked_rows():
    batch, states = hand_batch(), prompt_states(batch := hand_batch())
    cfg = PPOConfig(epochs=1, minibatch_size=4, lr=0.0, value_lr=0.0)
    learner = make_learner(tiny_lm(), cfg, critic=tiny_critic())
    mask = torch.tensor([1.0, 0.0, 1.0, 0.0])
    base = learner.update(batch, torch.zeros(4, 6), value=ValueTargets(
        "sequence", torch.tensor([1.0, 0.0, 0.0, 1.0]), states=states, mask=mask))
    other = learner.update(batch, torch.zeros(4, 6), value=ValueTargets(
        "sequence", torch.tensor([1.0, 1.0, 0.0, 0.0]), states=states, mask=mask))
    assert base["losses/value_loss"] == pytest.approx(other["losses/value_loss"], abs=1e-7)


def test_value_targets_required_exactly_with_a_critic():
    batch = hand_batch()
    zeros = torch.zeros(4, 6)
    turn = ValueTargets("turn", torch.zeros(4), old_values=torch.zeros(4), states=prompt_states(batch))
    with pytest.raises(ValueError, match="value targets must be given"):
        make_learner(tiny_lm(), PPOConfig()).update(batch, zeros, value=turn)
    with pytest.raises(ValueError, match="value targets must be given"):
        make_learner(tiny_lm(), PPOConfig(), critic=tiny_critic()).update(batch, zeros)
    with pytest.raises(ValueError, match="old_logp has shape \\(4, 5\\)"):
        make_learner(tiny_lm(), PPOConfig()).update(batch, zeros, old_logp=zeros[:, :5])
    with pytest.raises(ValueError, match="turn-level returns have shape"):
        make_learner(tiny_lm(), PPOConfig(), critic=tiny_critic()).update(
            batch, zeros, value=ValueTargets("turn", zeros, old_values=zeros, states=prompt_states(batch)))


def test_critic_helpers_match_direct_forward():
    batch = hand_batch()
    critic = tiny_critic()
    learner = make_learner(tiny_lm(), PPOConfig(), critic=critic)
    values = learner.critic_token_values(batch, chunk_size=1)
    with torch.no_grad():
        expected = token_values(critic.token_values(batch.input_ids, batch.attention_mask),
                                        batch.response_mask)
        turn_expected = critic(prompt_states(batch))
    assert torch.allclose(values, expected, atol=1e-6)
    assert values[0, :4].tolist() == [0.0] * 4  # 0 off the response
    assert torch.allclose(learner.critic_values(prompt_states(batch), chunk_size=3), turn_expected, atol=1e-6)
    assert learner.critic.training  # the helpers restore the mode they found


@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_first_epoch_ratios_are_exactly_one_under_the_update_precision(precision):
    batch = hand_batch()
    advantages = batch.response_mask * torch.tensor([[1.0], [-1.0], [0.5], [2.0]])
    cfg = PPOConfig(epochs=1, minibatch_size=2, lr=0.0)
    learner = PPOLearner(fabric(precision), tiny_lm(), cfg, seed=0)
    stats = learner.update(batch, advantages)  # old log-probs computed by the learner itself
    assert stats["losses/approx_kl"] == 0.0 and stats["losses/clipfrac"] == 0.0
    # Log-probs taken outside Fabric (full precision) are what the ratio would be measured against
    # otherwise: under bf16 they differ from the update's own forward pass.
    outside = learner.update(batch, advantages, old_logp=compute_old_logp(learner.policy.module, batch))
    if precision == "bf16-mixed":
        assert outside["losses/approx_kl"] != 0.0


def test_drgrpo_needs_a_constant_divisor_so_prompt_width_does_not_change_the_loss():
    with pytest.raises(ValueError, match="loss_scale_factor must be set"):
        make_learner(tiny_lm(), PPOConfig(loss_agg="seq-mean-token-sum-norm"))
    batch = hand_batch()
    wider = TokenBatch(  # the same rows behind three more columns of left padding
        input_ids=torch.cat([torch.zeros(4, 3, dtype=torch.long), batch.input_ids], dim=1),
        attention_mask=torch.cat([torch.zeros(4, 3, dtype=torch.long), batch.attention_mask], dim=1),
        response_mask=torch.cat([torch.zeros(4, 3), batch.response_mask], dim=1),
    )
    advantages = batch.response_mask * torch.tensor([[1.0], [-1.0], [0.5], [2.0]])
    wide_adv = torch.cat([torch.zeros(4, 3), advantages], dim=1)
    cfg = one_step_cfg(lr=0.0, loss_agg="seq-mean-token-sum-norm", loss_scale_factor=6.0)
    narrow_loss = make_learner(tiny_lm(), cfg).update(batch, advantages)["losses/policy_loss"]
    wide_loss = make_learner(tiny_lm(), cfg).update(wider, wide_adv)["losses/policy_loss"]
    assert narrow_loss == pytest.approx(wide_loss, abs=1e-6)
    assert narrow_loss == pytest.approx(-(advantages.sum() / 4 / 6.0).item(), abs=1e-6)  # ratio 1


def test_checkpoint_round_trip_resumes_identically(tmp_path):
    batch = hand_batch()
    advantages = batch.response_mask * torch.tensor([[1.0], [-1.0], [0.5], [2.0]])
    states = prompt_states(batch)
    cfg = PPOConfig(epochs=2, minibatch_size=2, lr=1e-2, value_lr=1e-2)
    f = fabric()
    learner = PPOLearner(f, tiny_lm(0), cfg, seed=0, critic=tiny_critic())
    old_logp = learner.old_logprobs(batch, chunk_size=4)
    value = ValueTargets("turn", TURN_RETURNS, old_values=learner.critic_values(states, 4), states=states)
    learner.update(batch, advantages, old_logp=old_logp, value=value)
    f.save(tmp_path / "ckpt.pt", {"learner": learner.state_dict()})

    restored = PPOLearner(f, tiny_lm(5), cfg, seed=0, critic=tiny_critic(seed=9))
    restored.load_state_dict(f.load(tmp_path / "ckpt.pt")["learner"])
    assert restored.num_updates == 1
    first = learner.update(batch, advantages, old_logp=old_logp, value=value)
    second = restored.update(batch, advantages, old_logp=old_logp, value=value)
    assert first == second
    for a, b in zip(learner.policy.parameters(), restored.policy.parameters(), strict=True):
        assert torch.equal(a, b)
    for a, b in zip(learner.critic.parameters(), restored.critic.parameters(), strict=True):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="has a critic but this learner lacks one"):
        make_learner(tiny_lm(), cfg).load_state_dict(learner.state_dict())


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("epochs", 0, "PPOConfig.epochs must be >= 1"),
        ("clip_low", 1.0, "PPOConfig.clip_low must be in"),
        ("dual_clip", 1.0, "PPOConfig.dual_clip must be > 1"),
        ("loss_agg", "mean", "PPOConfig.loss_agg must be one of"),
        ("kl_kind", "k4", "PPOConfig.kl_kind must be one of"),
        ("max_grad_norm", 0.0, "PPOConfig.max_grad_norm must be > 0"),
        ("value_lr", -1.0, "PPOConfig.value_lr must be >= 0"),
    ],
)
def test_config_names_the_bad_field(field, value, message):
    with pytest.raises(ValueError, match=message):
        PPOConfig(**{field: value})
