"""The PPO losses' options and checks at their edges, with hand-worked numbers: the default clip range,
which values are accepted and refused, sample weights with B != T, scale factors handed through, and
the dual-clip statistics at the floor (the cases the main loss tests leave open; found by mutation
testing, docs/mutation_testing.md)."""

import math

import pytest
import torch

from policy.losses import aggregate, clipped_value_loss, ppo_policy_loss, sequence_value_loss

F64 = torch.float64


def t64(xs):
    return torch.tensor(xs, dtype=F64)


def test_the_default_clip_range_is_0_8_to_1_2():
    # ratio 0.5 with A = -1: clip(0.5) = 0.8 -> max(0.5, 0.8) = 0.8; ratio 1.5 with A = 1: max(-1.5, -1.2) = -1.2
    logp = torch.log(t64([[0.5, 1.5]]))
    loss, stats = ppo_policy_loss(logp, torch.zeros(1, 2, dtype=F64), t64([[-1.0, 1.0]]), torch.ones(1, 2))
    assert loss.item() == pytest.approx((0.8 - 1.2) / 2)
    assert stats["clipfrac"].item() == 1.0


@pytest.mark.parametrize(("clip_low", "clip_high"), [(0.0, 0.2), (0.2, 0.0), (0.0, 0.0)])
def test_a_zero_clip_is_accepted(clip_low, clip_high):
    # ratio 1 everywhere: loss -A whatever the clip range
    zeros = torch.zeros(1, 2, dtype=F64)
    loss, _ = ppo_policy_loss(zeros, zeros, t64([[1.0, 3.0]]), torch.ones(1, 2), clip_low=clip_low, clip_high=clip_high)
    assert loss.item() == pytest.approx(-2.0)


@pytest.mark.parametrize(("clip_low", "clip_high"), [(-0.1, 0.2), (0.2, -0.1)])
def test_a_negative_clip_is_refused(clip_low, clip_high):
    zeros = torch.zeros(1, 1, dtype=F64)
    with pytest.raises(ValueError, match=r"clip_low=.* and clip_high=.* must be >= 0"):
        ppo_policy_loss(zeros, zeros, zeros, torch.ones(1, 1), clip_low=clip_low, clip_high=clip_high)


def test_a_dual_clip_just_above_one_is_accepted_and_one_is_refused():
    # ratio 4, A = -1: clipped loss max(4, 1.2) = 4, dual clip 1.5 caps it at 1.5
    logp, old = torch.log(t64([[4.0]])), torch.zeros(1, 1, dtype=F64)
    loss, stats = ppo_policy_loss(logp, old, t64([[-1.0]]), torch.ones(1, 1), dual_clip=1.5)
    assert loss.item() == pytest.approx(1.5) and stats["clipfrac_lower"].item() == 1.0
    with pytest.raises(ValueError, match="dual_clip"):
        ppo_policy_loss(logp, old, t64([[-1.0]]), torch.ones(1, 1), dual_clip=1.0)


def test_clipfrac_lower_counts_only_tokens_above_the_floor():
    # A = -1, dual clip 2: the floor is 2. Ratios 2 (at the floor: not clipped), 4 (clipped), and a
    # token with A = 0 (loss 0, floor 0: not a negative advantage, not counted)
    logp = torch.log(t64([[2.0, 4.0, 2.0]]))
    loss, stats = ppo_policy_loss(logp, torch.zeros(1, 3, dtype=F64), t64([[-1.0, -1.0, 0.0]]), torch.ones(1, 3),
                                  dual_clip=2.0)
    assert loss.item() == pytest.approx((2.0 + 2.0 + 0.0) / 3)
    assert stats["clipfrac_lower"].item() == pytest.approx(1 / 3)


def test_sample_weights_are_per_row_when_rows_and_tokens_differ_in_number():
    # B = 2 rows, T = 3 tokens, ratio 1, A = 1: per-token loss -1; weights 3 and 1 -> (3 * 3 + 1 * 3) / 6 = 2
    zeros = torch.zeros(2, 3, dtype=F64)
    loss, _ = ppo_policy_loss(zeros, zeros, torch.ones(2, 3, dtype=F64), torch.ones(2, 3), weights=t64([3.0, 1.0]))
    assert loss.item() == pytest.approx(-2.0)
    with pytest.raises(ValueError, match=r"weights must be \(B,\) = \(2,\), got \(3,\)"):
        ppo_policy_loss(zeros, zeros, torch.ones(2, 3, dtype=F64), torch.ones(2, 3), weights=t64([1.0, 1.0, 1.0]))


def test_the_scale_factor_reaches_the_dr_grpo_aggregate():
    # ratio 1, A = 1: token sums -3 and -3 -> mean -3; over the scale factor 6 (not T = 3): -0.5
    zeros = torch.zeros(2, 3, dtype=F64)
    mode = "seq-mean-token-sum-norm"
    loss, _ = ppo_policy_loss(zeros, zeros, torch.ones(2, 3, dtype=F64), torch.ones(2, 3), agg=mode, scale_factor=6.0)
    assert loss.item() == pytest.approx(-0.5)
    # value errors 1 per token: 0.5 * (3 + 3) / 2 / 6 = 0.25
    values = torch.ones(2, 3, dtype=F64)
    loss, _ = clipped_value_loss(values, values, torch.zeros(2, 3, dtype=F64), torch.ones(2, 3), agg=mode,
                                 scale_factor=6.0)
    assert loss.item() == pytest.approx(0.25)
    assert aggregate(torch.ones(1, 2, dtype=F64), torch.ones(1, 2), mode, scale_factor=0.5).item() == pytest.approx(4.0)


def test_aggregate_refuses_a_mask_of_another_shape_and_one_dimensional_losses():
    with pytest.raises(ValueError, match=r"loss \(2, 3\) and mask \(2, 2\) must share a \(B, T\) shape"):
        aggregate(torch.zeros(2, 3), torch.ones(2, 2), "token-mean")
    with pytest.raises(ValueError, match=r"loss \(3,\) and mask \(3,\)"):
        aggregate(torch.zeros(3), torch.ones(3), "token-mean")
    with pytest.raises(ValueError, match="mode"):
        aggregate(torch.zeros(1, 1), torch.ones(1, 1), "sum")


def test_ppo_refuses_inputs_of_different_shapes_naming_them():
    with pytest.raises(ValueError, match=r"logp \(1, 2\), old_logp \(1, 3\), advantages \(1, 2\) and mask \(1, 2\)"):
        ppo_policy_loss(torch.zeros(1, 2), torch.zeros(1, 3), torch.zeros(1, 2), torch.ones(1, 2))


def test_sequence_value_loss_checks_and_masked_rows():
    # BCE of logit 0 against 1: ln 2; the masked row (logit 9 against 0, loss ~9) does not count
    loss = sequence_value_loss(t64([0.0, 9.0]), t64([1.0, 0.0]), t64([1.0, 0.0]))
    assert loss.item() == pytest.approx(math.log(2))
    for returns in ([1.5, 0.0], [-0.5, 0.0]):
        with pytest.raises(ValueError, match=r"sequence_value_loss needs returns in \[0, 1\]"):
            sequence_value_loss(t64([0.0, 0.0]), t64(returns), t64([1.0, 1.0]))
    with pytest.raises(ValueError, match=r"logits, returns and mask must share one \(B,\) shape"):
        sequence_value_loss(torch.zeros(1, 2), torch.zeros(1, 2), torch.ones(1, 2))
    with pytest.raises(ValueError, match=r"must share one \(B,\) shape"):
        sequence_value_loss(torch.zeros(2), torch.zeros(3), torch.ones(2))


def test_clipped_value_loss_refuses_inputs_of_different_shapes():
    with pytest.raises(ValueError, match=r"values, old_values, returns and mask must share one \(B, T\) shape"):
        clipped_value_loss(torch.zeros(1, 2), torch.zeros(1, 3), torch.zeros(1, 2), torch.ones(1, 2))
