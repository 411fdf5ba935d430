"""PPO losses as pure functions on (B, T) token tensors, following verl's conventions
(``docs/conventions.md``): the clipped (and dual-clipped) policy loss, KL
estimators, loss aggregation modes, the clipped value loss, the entropy bonus and explained variance.

Masks are 0/1 (B, T) tensors, 1 on the trained response tokens. Masked entries never reach a
returned value, even when they hold NaN or inf (their gradients are not guarded: keep the inputs
finite), and fully masked rows or batches never produce NaN.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from policy.advantages.group_norm import check_option
from policy.config import AGG_MODES, KL_KINDS

LOG_RATIO_CLAMP = 20.0  # verl clamps log-ratios to [-20, 20] before exponentiating
K3_CLAMP = 10.0


def _masked(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``x * mask`` with masked entries exactly 0, whatever they held (NaN, inf)."""
    return torch.where(mask > 0, x * mask, torch.zeros_like(x))


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``x`` over the valid entries: sum(mask * x) / sum(mask); 0 when nothing is valid."""
    count = mask.sum()
    return torch.where(count > 0, _masked(x, mask).sum() / count.clamp(min=1e-12), torch.zeros_like(count))


def aggregate(loss: torch.Tensor, mask: torch.Tensor, mode: str, scale_factor: float | None = None) -> torch.Tensor:
    """Reduce a (B, T) per-token loss to a scalar the way verl's ``loss_agg_mode`` does (one rank).

    - ``"token-mean"``: sum(mask * L) / sum(mask), every valid token weighs the same.
    - ``"seq-mean-token-sum"``: each sequence's token sum, averaged over the sequences with at
      least one valid token.
    - ``"seq-mean-token-mean"``: each sequence's sum / (count + 1e-8), averaged over the sequences
      with at least one valid token.
    - ``"seq-mean-token-sum-norm"`` (Dr. GRPO): ``seq-mean-token-sum`` divided by the constant
      ``scale_factor`` (default the padded length T; pass the maximum response length to keep it
      constant across batches). ``scale_factor`` is ignored by the other modes, as in verl.
    A fully masked row does not count as a sequence; a fully masked batch gives 0.
    """
    check_option("mode", mode, AGG_MODES)
    if loss.shape != mask.shape or loss.dim() != 2:
        raise ValueError(f"loss {tuple(loss.shape)} and mask {tuple(mask.shape)} must share a (B, T) shape")
    mask = mask.to(loss.dtype)
    if mode == "token-mean":
        return masked_mean(loss, mask)
    token_sum = _masked(loss, mask).sum(dim=-1)  # (B,)
    count = mask.sum(dim=-1)  # (B,)
    valid_seq = (count > 0).to(loss.dtype)  # (B,)
    per_seq = token_sum / (count + 1e-8) if mode == "seq-mean-token-mean" else token_sum  # (B,)
    out = masked_mean(per_seq, valid_seq)
    if mode == "seq-mean-token-sum-norm":
        factor = loss.shape[-1] if scale_factor is None else scale_factor
        if factor <= 0:
            raise ValueError(f"scale_factor={factor!r} must be > 0")
        out = out / factor
    return out


def ppo_policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float | None = None,
    agg: str = "token-mean",
    scale_factor: float | None = None,
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """verl's clipped PPO policy loss (a loss to minimise) and its statistics.

    logp, old_logp, advantages, mask: (B, T). weights: optional (B,) per-sample weights.

    ``ratio = exp(clamp(logp - old_logp, -20, 20))``;
    ``l1 = max(-A * ratio, -A * clip(ratio, 1 - clip_low, 1 + clip_high))``;
    with ``dual_clip = c`` (verl's ``clip_ratio_c``, 3.0 there; must be > 1), tokens with A < 0
    take ``min(l1, -A * c)``. ``dual_clip=None`` turns the dual clip off (verl always has it on).

    Weights multiply each sample's per-token loss before aggregation; the denominators of
    ``agg`` are unchanged (token counts, sequence counts), so a weight scales that sample's share
    of the loss and a weight of 0 removes it while its tokens still count in ``token-mean``.
    Normalise weights upstream (e.g. to mean 1) to keep the loss scale. Statistics are unweighted.

    Stats (detached scalars): ``clipfrac`` = masked mean of [clipped term > unclipped term];
    ``clipfrac_lower`` = masked mean of [A < 0 and l1 > -A * c] (0 without dual clip);
    ``approx_kl`` = masked mean of ``-(clamped log-ratio)``.
    """
    if not logp.shape == old_logp.shape == advantages.shape == mask.shape:
        raise ValueError(
            f"logp {tuple(logp.shape)}, old_logp {tuple(old_logp.shape)}, advantages {tuple(advantages.shape)} "
            f"and mask {tuple(mask.shape)} must share one (B, T) shape"
        )
    if clip_low < 0 or clip_high < 0:
        raise ValueError(f"clip_low={clip_low} and clip_high={clip_high} must be >= 0")
    if dual_clip is not None and dual_clip <= 1:
        raise ValueError(f"dual_clip={dual_clip} must be > 1 or None")
    mask = mask.to(logp.dtype)
    log_ratio = torch.clamp(logp - old_logp, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)  # (B, T)
    ratio = torch.exp(log_ratio)  # (B, T)
    unclipped = -advantages * ratio  # (B, T)
    clipped = -advantages * torch.clamp(ratio, 1 - clip_low, 1 + clip_high)  # (B, T)
    loss = torch.maximum(unclipped, clipped)  # (B, T)
    clipfrac = masked_mean((clipped > unclipped).to(logp.dtype), mask)
    if dual_clip is not None:
        floor = -advantages * dual_clip  # (B, T)
        negative = advantages < 0  # (B, T)
        clipfrac_lower = masked_mean((negative & (loss > floor)).to(logp.dtype), mask)
        loss = torch.where(negative, torch.minimum(loss, floor), loss)
    else:
        clipfrac_lower = torch.zeros((), dtype=logp.dtype, device=logp.device)
    if weights is not None:
        if weights.shape != (logp.shape[0],):
            raise ValueError(f"weights must be (B,) = ({logp.shape[0]},), got {tuple(weights.shape)}")
        loss = loss * weights.to(loss.dtype).unsqueeze(-1)  # (B, T)
    stats = {
        "clipfrac": clipfrac.detach(),
        "clipfrac_lower": clipfrac_lower.detach(),
        "approx_kl": masked_mean(-log_ratio, mask).detach(),
    }
    return aggregate(loss, mask, agg, scale_factor), stats


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, kind: str) -> torch.Tensor:
    """Per-token KL estimate between the policy and a reference, verl's estimators. (B, T) -> (B, T).

    ``"k1"``: logp - ref. ``"abs"``: |logp - ref|. ``"k2"``: 0.5 (logp - ref)^2 (verl "mse").
    ``"k3"`` (verl "low_var_kl"): d = clamp(ref - logp, -20, 20), exp(d) - d - 1, clamped to [-10, 10].
    """
    check_option("kind", kind, KL_KINDS)
    diff = logp - ref_logp  # (B, T)
    if kind == "k1":
        return diff
    if kind == "abs":
        return diff.abs()
    if kind == "k2":
        return 0.5 * diff.square()
    d = torch.clamp(ref_logp - logp, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)  # (B, T)
    return torch.clamp(torch.exp(d) - d - 1, -K3_CLAMP, K3_CLAMP)


def clipped_value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    clip: float = 0.2,
    agg: str = "token-mean",
    scale_factor: float | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """verl's clipped value loss: ``0.5 * agg(max((V - R)^2, (clip(V, V_old - c, V_old + c) - R)^2))``.

    values, old_values, returns, mask: (B, T). ``clip=math.inf`` disables clipping. Returns
    ``(loss, {"clipfrac": masked mean of [clipped error > unclipped error]})``.
    """
    if not values.shape == old_values.shape == returns.shape == mask.shape:
        raise ValueError("values, old_values, returns and mask must share one (B, T) shape")
    clipped_values = torch.clamp(values, old_values - clip, old_values + clip)  # (B, T)
    err = (values - returns).square()  # (B, T)
    err_clipped = (clipped_values - returns).square()  # (B, T)
    loss = 0.5 * aggregate(torch.maximum(err, err_clipped), mask, agg, scale_factor)
    clipfrac = masked_mean((err_clipped > err).to(values.dtype), mask.to(values.dtype))
    return loss, {"clipfrac": clipfrac.detach()}


def sequence_value_loss(logits: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """SPPO's critic loss: binary cross-entropy of ``sigmoid(logit)`` against returns in [0, 1].

    logits, returns, mask: (B,). The mean over rows with mask 1; 0 when none is.
    """
    if not logits.shape == returns.shape == mask.shape or logits.dim() != 1:
        raise ValueError("logits, returns and mask must share one (B,) shape")
    if bool(((returns < 0) | (returns > 1)).any()):
        raise ValueError("sequence_value_loss needs returns in [0, 1]")
    bce = F.binary_cross_entropy_with_logits(logits, returns.to(logits.dtype), reduction="none")  # (B,)
    return masked_mean(bce, mask.to(logits.dtype))


def entropy_bonus(
    entropy: torch.Tensor, mask: torch.Tensor, agg: str = "token-mean", scale_factor: float | None = None
) -> torch.Tensor:
    """The aggregated per-token entropy (B, T) -> scalar, positive; subtract ``coef *`` it from the loss.

    Aggregated like the policy loss (same mode and divisor), so the two terms keep their ratio."""
    return aggregate(entropy, mask, agg, scale_factor)


def explained_variance(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``1 - Var[target - pred] / Var[target]`` over the valid entries (any matching shapes).

    1 is a perfect critic, 0 no better than a constant, negative worse. When Var[target] is 0 (a
    constant target, one valid entry, or none) the ratio is undefined and this returns 0, never NaN.
    """
    mask = mask.to(target.dtype)
    n = mask.sum()

    def var(x: torch.Tensor) -> torch.Tensor:
        mean = masked_mean(x, mask)
        return masked_mean((x - mean).square(), mask)

    var_target = var(target)
    ratio = var(target - pred) / torch.where(var_target > 0, var_target, torch.ones_like(var_target))
    return torch.where((var_target > 0) & (n > 0), 1 - ratio, torch.zeros_like(var_target))
