"""PPO losses against hand-worked numbers and brute-force pure-Python references."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.losses import (
    AGG_MODES,
    aggregate,
    clipped_value_loss,
    entropy_bonus,
    explained_variance,
    kl_penalty,
    ppo_policy_loss,
)

F64 = torch.float64


def t64(xs):
    return torch.tensor(xs, dtype=F64)


# ----------------------------------------------------------------------------------------------
# Pure-Python references (loops, no tensors), written from the convention text.
# ----------------------------------------------------------------------------------------------

def ref_aggregate(loss, mask, mode, scale_factor=None):
    if mode == "token-mean":
        n = sum(sum(row) for row in mask)
        total = sum(x for lrow, mrow in zip(loss, mask, strict=True) for x, m in zip(lrow, mrow, strict=True) if m)
        return total / n if n else 0.0
    per_seq = []
    for lrow, mrow in zip(loss, mask, strict=True):
        count = sum(mrow)
        if count == 0:
            continue
        s = sum(x for x, m in zip(lrow, mrow, strict=True) if m)
        per_seq.append(s / (count + 1e-8) if mode == "seq-mean-token-mean" else s)
    out = sum(per_seq) / len(per_seq) if per_seq else 0.0
    if mode == "seq-mean-token-sum-norm":
        out /= scale_factor if scale_factor is not None else len(loss[0])
    return out


def ref_token_ppo(logp, old, adv, clip_low, clip_high, dual_clip):
    """One token: (loss, clipped?, lower-clipped?, negated log-ratio)."""
    lr = min(max(logp - old, -20.0), 20.0)
    ratio = math.exp(lr)
    unclipped = -adv * ratio
    clipped = -adv * min(max(ratio, 1 - clip_low), 1 + clip_high)
    l1 = max(unclipped, clipped)
    lower = False
    loss = l1
    if dual_clip is not None and adv < 0:
        lower = l1 > -adv * dual_clip
        loss = min(l1, -adv * dual_clip)
    return loss, clipped > unclipped, lower, -lr


# ----------------------------------------------------------------------------------------------
# aggregate
# ----------------------------------------------------------------------------------------------

LOSS = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]
MASK = [[1, 1, 0], [1, 0, 0], [0, 0, 0]]  # row 2 fully masked


def test_aggregate_modes_by_hand():
    loss, mask = t64(LOSS), t64(MASK)
    # token-mean: (1 + 2 + 4) / 3
    assert aggregate(loss, mask, "token-mean").item() == pytest.approx(7 / 3, abs=1e-12)
    # seq-mean-token-sum: row sums 3 and 4; the fully masked row is not a sequence -> 3.5
    assert aggregate(loss, mask, "seq-mean-token-sum").item() == pytest.approx(3.5, abs=1e-12)
    # seq-mean-token-mean: 3 / 2 = 1.5 and 4 / 1 = 4 -> 2.75 (each count + 1e-8)
    assert aggregate(loss, mask, "seq-mean-token-mean").item() == pytest.approx((3 / (2 + 1e-8) + 4 / (1 + 1e-8)) / 2, abs=1e-12)
    # seq-mean-token-sum-norm: 3.5 / padded length 3, or / 7 with an explicit factor
    assert aggregate(loss, mask, "seq-mean-token-sum-norm").item() == pytest.approx(3.5 / 3, abs=1e-12)
    assert aggregate(loss, mask, "seq-mean-token-sum-norm", scale_factor=7).item() == pytest.approx(0.5, abs=1e-12)


@pytest.mark.parametrize("mode", AGG_MODES)
def test_aggregate_fully_masked_batch_is_zero_and_masked_nan_is_ignored(mode):
    loss = t64([[float("nan"), float("inf")], [1.0, float("nan")]])
    assert aggregate(loss, torch.zeros(2, 2), mode).item() == 0.0
    value = aggregate(loss, t64([[0, 0], [1, 0]]), mode)
    assert math.isfinite(value.item())


def test_aggregate_rejects_unknown_mode_and_bad_factor():
    with pytest.raises(ValueError, match="mode.*token-mean"):
        aggregate(t64(LOSS), t64(MASK), "mean")
    with pytest.raises(ValueError, match="scale_factor"):
        aggregate(t64(LOSS), t64(MASK), "seq-mean-token-sum-norm", scale_factor=0)


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.lists(st.tuples(st.floats(-100, 100, allow_nan=False), st.booleans()), min_size=3, max_size=3),
        min_size=1,
        max_size=4,
    ),
    mode=st.sampled_from(AGG_MODES),
    scale_factor=st.sampled_from([None, 2.5]),
)
def test_aggregate_matches_reference(rows, mode, scale_factor):
    loss = [[c[0] for c in row] for row in rows]
    mask = [[int(c[1]) for c in row] for row in rows]
    got = aggregate(t64(loss), t64(mask), mode, scale_factor).item()
    assert got == pytest.approx(ref_aggregate(loss, mask, mode, scale_factor), abs=1e-9, rel=1e-9)


# ----------------------------------------------------------------------------------------------
# PPO policy loss
# ----------------------------------------------------------------------------------------------

# Four tokens, clip 0.2:
#   a: A = +1, ratio 1.5 -> unclipped -1.5, clipped -1.2 -> l1 = -1.2 (clipped term is larger: counts)
#   b: A = +1, ratio 0.5 -> unclipped -0.5, clipped -0.8 -> l1 = -0.5
#   c: A = -1, ratio 5   -> unclipped 5, clipped 1.2 -> l1 = 5; dual clip c = 3: min(5, 3) = 3 (lower clip)
#   d: A = -2, ratio 1.1 -> unclipped = clipped = 2.2; 2.2 < 6 = -A * c, so it stays 2.2
RATIOS = [1.5, 0.5, 5.0, 1.1]
ADV = [1.0, 1.0, -1.0, -2.0]


def ppo_inputs():
    old = t64([[-1.0, -2.0, -3.0, -0.5]])
    logp = (old + torch.log(t64([RATIOS]))).requires_grad_()
    return logp, old, t64([ADV]), torch.ones(1, 4, dtype=F64)


def test_ppo_loss_dual_clip_by_hand():
    logp, old, adv, mask = ppo_inputs()
    loss, stats = ppo_policy_loss(logp, old, adv, mask, dual_clip=3.0)
    assert loss.item() == pytest.approx((-1.2 - 0.5 + 3.0 + 2.2) / 4, abs=1e-12)  # 0.875
    assert stats["clipfrac"].item() == pytest.approx(0.25)  # token a
    assert stats["clipfrac_lower"].item() == pytest.approx(0.25)  # token c
    assert stats["approx_kl"].item() == pytest.approx(-math.log(1.5 * 0.5 * 5.0 * 1.1) / 4, abs=1e-12)
    loss.backward()
    # d loss / d logp: clipped tokens a and c are flat; b: -A * ratio = -0.5; d: -A * ratio = 2.2; / 4 tokens
    assert torch.allclose(logp.grad, t64([[0.0, -0.5 / 4, 0.0, 2.2 / 4]]))


def test_ppo_loss_without_dual_clip_and_asymmetric_clip():
    logp, old, adv, mask = ppo_inputs()
    loss, stats = ppo_policy_loss(logp, old, adv, mask)
    assert loss.item() == pytest.approx((-1.2 - 0.5 + 5.0 + 2.2) / 4, abs=1e-12)  # token c keeps 5
    assert stats["clipfrac_lower"].item() == 0.0
    # clip_low 0.6, clip_high 0.05 -> ratios clipped to [0.4, 1.05]:
    #   a: clip(1.5) = 1.05 -> max(-1.5, -1.05) = -1.05 (clipped); b: 0.5 inside -> -0.5
    #   c: clip(5) = 1.05 -> max(5, 1.05) = 5; d: clip(1.1) = 1.05 -> max(2.2, 2.1) = 2.2
    loss, stats = ppo_policy_loss(logp, old, adv, mask, clip_low=0.6, clip_high=0.05)
    assert loss.item() == pytest.approx((-1.05 - 0.5 + 5.0 + 2.2) / 4, abs=1e-12)
    assert stats["clipfrac"].item() == pytest.approx(0.25)  # token a


def test_ppo_log_ratio_is_clamped_at_20():
    # log-ratio 50 clamps to 20; A = -1 with dual clip 3 -> min(exp(20), 3) = 3; approx_kl = -20
    loss, stats = ppo_policy_loss(t64([[50.0]]), t64([[0.0]]), t64([[-1.0]]), t64([[1]]), dual_clip=3.0)
    assert loss.item() == pytest.approx(3.0)
    assert stats["approx_kl"].item() == pytest.approx(-20.0)
    loss, _ = ppo_policy_loss(t64([[50.0]]), t64([[0.0]]), t64([[-1.0]]), t64([[1]]))
    assert loss.item() == pytest.approx(math.exp(20.0))


def test_ppo_sample_weights_scale_losses_not_denominators():
    # ratio 1 everywhere, A = 1 -> per-token loss -1. Row 0 has 2 valid tokens, row 1 has 1.
    zeros = torch.zeros(2, 2, dtype=F64)
    mask = t64([[1, 1], [1, 0]])
    adv = torch.ones(2, 2, dtype=F64)
    plain, _ = ppo_policy_loss(zeros, zeros, adv, mask)
    assert plain.item() == pytest.approx(-1.0)
    # token-mean: (2 * -1 * 2 + 0 * -1) / 3 valid tokens = -4/3
    weighted, _ = ppo_policy_loss(zeros, zeros, adv, mask, weights=t64([2.0, 0.0]))
    assert weighted.item() == pytest.approx(-4 / 3)
    # seq-mean-token-sum: row sums 2 * -2 = -4 and 0 -> -2 over the two sequences
    weighted, _ = ppo_policy_loss(zeros, zeros, adv, mask, weights=t64([2.0, 0.0]), agg="seq-mean-token-sum")
    assert weighted.item() == pytest.approx(-2.0)
    with pytest.raises(ValueError, match="weights"):
        ppo_policy_loss(zeros, zeros, adv, mask, weights=t64([1.0]))


def test_ppo_fully_masked_rows_and_batch():
    logp = t64([[0.1, float("nan")], [float("nan"), float("nan")]])
    old = torch.zeros(2, 2, dtype=F64)
    adv = t64([[1.0, 1.0], [1.0, 1.0]])
    loss, stats = ppo_policy_loss(logp, old, adv, t64([[1, 0], [0, 0]]))
    # the one valid token: ratio e^0.1 = 1.105 is inside [0.8, 1.2], A = 1 -> -1.105; NaNs elsewhere ignored
    assert loss.item() == pytest.approx(-math.exp(0.1))
    for value in stats.values():
        assert math.isfinite(value.item())
    loss, stats = ppo_policy_loss(logp, old, adv, torch.zeros(2, 2), agg="seq-mean-token-mean")
    assert loss.item() == 0.0 and all(v.item() == 0.0 for v in stats.values())


def test_ppo_rejects_bad_options():
    logp, old, adv, mask = ppo_inputs()
    with pytest.raises(ValueError, match="dual_clip"):
        ppo_policy_loss(logp, old, adv, mask, dual_clip=1.0)
    with pytest.raises(ValueError, match="mode"):
        ppo_policy_loss(logp, old, adv, mask, agg="sum")


@settings(max_examples=150, deadline=None)
@given(
    tokens=st.lists(
        st.tuples(st.floats(-30, 30), st.floats(-30, 30), st.floats(-5, 5), st.booleans()), min_size=4, max_size=4
    ),
    clip_low=st.sampled_from([0.1, 0.2]),
    clip_high=st.sampled_from([0.2, 0.28]),
    dual_clip=st.sampled_from([None, 3.0]),
    mode=st.sampled_from(AGG_MODES),
)
def test_ppo_matches_reference(tokens, clip_low, clip_high, dual_clip, mode):
    rows = [tokens[:2], tokens[2:]]  # (2, 2)
    logp = t64([[t[0] for t in r] for r in rows])
    old = t64([[t[1] for t in r] for r in rows])
    adv = t64([[t[2] for t in r] for r in rows])
    mask = [[int(t[3]) for t in r] for r in rows]
    loss, stats = ppo_policy_loss(logp, old, adv, t64(mask), clip_low=clip_low, clip_high=clip_high, dual_clip=dual_clip, agg=mode)
    per_token = [[ref_token_ppo(*t[:3], clip_low, clip_high, dual_clip) for t in r] for r in rows]
    expected = ref_aggregate([[p[0] for p in r] for r in per_token], mask, mode)
    assert loss.item() == pytest.approx(expected, rel=1e-9, abs=1e-9)
    valid = [p for r, m in zip(per_token, mask, strict=True) for p, keep in zip(r, m, strict=True) if keep]
    n = len(valid) or 1
    assert stats["clipfrac"].item() == pytest.approx(sum(p[1] for p in valid) / n)
    assert stats["clipfrac_lower"].item() == pytest.approx(sum(p[2] for p in valid) / n)
    assert stats["approx_kl"].item() == pytest.approx(sum(p[3] for p in valid) / n, abs=1e-12)


# ----------------------------------------------------------------------------------------------
# KL, value loss, entropy, explained variance
# ----------------------------------------------------------------------------------------------

def test_kl_estimators_by_hand():
    logp, ref = t64([[math.log(0.5)]]), t64([[math.log(0.25)]])
    ln2 = math.log(2)  # logp - ref
    assert kl_penalty(logp, ref, "k1").item() == pytest.approx(ln2)
    assert kl_penalty(ref, logp, "k1").item() == pytest.approx(-ln2)
    assert kl_penalty(ref, logp, "abs").item() == pytest.approx(ln2)
    assert kl_penalty(logp, ref, "k2").item() == pytest.approx(0.5 * ln2**2)  # 0.2402265
    # k3: d = ref - logp = -ln 2 -> exp(d) - d - 1 = 0.5 + ln 2 - 1 = 0.1931472
    assert kl_penalty(logp, ref, "k3").item() == pytest.approx(0.5 + ln2 - 1)
    # k3 clamps: d = 30 -> clamp 20 -> exp(20) - 21, then clamp to 10
    assert kl_penalty(t64([[0.0]]), t64([[30.0]]), "k3").item() == 10.0
    assert kl_penalty(logp, logp, "k3").item() == 0.0
    # A token the policy cannot sample (logp = -inf): d = +inf would give inf - inf = nan; clamped to 20 it
    # gives exp(20) - 21, then 10. (The lower clamp of d never shows: exp(d) - d - 1 is then >= 19 -> 10.)
    assert kl_penalty(t64([[-math.inf]]), t64([[0.0]]), "k3").item() == 10.0
    with pytest.raises(ValueError, match="kind.*k3"):
        kl_penalty(logp, ref, "low_var")


def test_clipped_value_loss_by_hand():
    values, old = t64([[1.0, 0.0, 0.6]]), t64([[0.5, 0.5, 0.5]])
    returns, mask = t64([[2.0, 0.0, 0.0]]), t64([[1, 1, 1]])
    # clip 0.2 keeps V within [0.3, 0.7]: clipped V = [0.7, 0.3, 0.6]
    # errors: unclipped [1, 0, 0.36]; clipped [1.69, 0.09, 0.36] -> max [1.69, 0.09, 0.36]
    loss, stats = clipped_value_loss(values, old, returns, mask, clip=0.2)
    assert loss.item() == pytest.approx(0.5 * (1.69 + 0.09 + 0.36) / 3, abs=1e-12)
    assert stats["clipfrac"].item() == pytest.approx(2 / 3)
    loss, stats = clipped_value_loss(values, old, returns, mask, clip=math.inf)
    assert loss.item() == pytest.approx(0.5 * (1.0 + 0.0 + 0.36) / 3, abs=1e-12)
    assert stats["clipfrac"].item() == 0.0
    # masking the third token: 0.5 * (1.69 + 0.09) / 2 under token-mean
    loss, _ = clipped_value_loss(values, old, returns, t64([[1, 1, 0]]))
    assert loss.item() == pytest.approx(0.5 * 1.78 / 2, abs=1e-12)


def test_entropy_bonus_aggregates():
    entropy, mask = t64([[1.0, 3.0], [2.0, 9.0]]), t64([[1, 1], [1, 0]])
    assert entropy_bonus(entropy, mask).item() == pytest.approx(2.0)  # (1 + 3 + 2) / 3
    assert entropy_bonus(entropy, mask, "seq-mean-token-mean").item() == pytest.approx((2.0 + 2.0) / 2, abs=1e-7)
    # Dr. GRPO: token sums (4, 2), their mean 3, over the same constant divisor as the policy loss
    assert entropy_bonus(entropy, mask, "seq-mean-token-sum-norm", 6.0).item() == pytest.approx(3.0 / 6.0)


def test_explained_variance_by_hand_and_degenerate_cases():
    target, pred = t64([1.0, 2.0, 3.0, 100.0]), t64([1.0, 2.0, 2.0, -100.0])
    mask = t64([1, 1, 1, 0])
    # residual [0, 0, 1]: var 2/9; target [1, 2, 3]: var 2/3 -> 1 - 1/3 = 2/3
    assert explained_variance(pred, target, mask).item() == pytest.approx(2 / 3)
    assert explained_variance(target, target, mask).item() == pytest.approx(1.0)
    # constant target, a single entry, nothing valid: 0, never NaN
    assert explained_variance(pred, t64([5.0, 5.0, 5.0, 1.0]), mask).item() == 0.0
    assert explained_variance(pred, target, t64([0, 1, 0, 0])).item() == 0.0
    assert explained_variance(pred, target, torch.zeros(4)).item() == 0.0
