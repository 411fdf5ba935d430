"""One draw per row from a categorical distribution, by inverse CDF from a given random number: the
one sampler of Reverie (the world model's decoder and the policy's cached sampling both draw here).

Why not ``torch.multinomial``: on CPU it costs about as much as an attention layer of the tiny
policy for a 16 x 110 batch (~150 us, once per decode step) and grows to ~0.2 s for a 150k-token
vocabulary. A cumulative sum and a binary search do the same draw for a fraction of that, and
taking the random numbers as input lets the caller fix which number each (row, step) uses.
"""

from __future__ import annotations

import torch


def draw_categorical(weights: torch.Tensor, fractions: torch.Tensor) -> torch.Tensor:
    """Index per row of ``weights`` (B, V), each drawn with probability proportional to its weight.

    ``fractions`` (B,): one number ``q`` in [0, 1] per row; for a uniform ``u`` in [0, 1) either ``u``
    or ``1 - u`` gives the categorical distribution. Row ``b`` draws the first index whose running
    sum reaches ``q * total`` (up to float rounding of the running sums). A zero-weight index is never
    drawn: its running sum equals its predecessor's, which reaches the target first, and a target of
    0 is raised to the smallest positive float, which only a positive running sum reaches (for any
    target above 0 that changes nothing). Rows need not be normalised; they must be non-negative with
    a positive, finite total, which is not checked here (per decode step a check costs as much as the
    draw): a row with NaN weights draws the last index. Returns (B,) long.
    """
    cdf = weights.float().cumsum(dim=-1)  # (B, V) non-decreasing, also in floating point
    target = fractions.to(cdf)[:, None] * cdf[:, -1:]  # (B, 1) in [0, total]
    target = target.clamp_(min=torch.finfo(cdf.dtype).smallest_normal * 2.0**-23)  # 0 -> smallest subnormal
    index = torch.searchsorted(cdf, target)  # (B, 1) first running sum >= target
    return index.squeeze(-1).clamp_(max=weights.shape[-1] - 1)  # only a NaN row is past the end


def inverse_cdf_sample(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """``(B, V)`` non-negative weights, each row with a positive sum (it need not be 1) -> ``(B,)`` drawn
    indices, with one uniform number per row from ``generator`` (equal generator states, equal draws).

    Index ``i`` is drawn with probability ``probs[b, i] / probs[b].sum()``; an index of weight 0 is
    never drawn (``draw_categorical``).
    """
    if probs.dim() != 2:
        raise ValueError(f"inverse_cdf_sample expects (B, V) weights, got shape {tuple(probs.shape)}")
    u = torch.rand((probs.shape[0],), generator=generator, device=probs.device, dtype=probs.dtype)  # (B,) in [0, 1)
    return draw_categorical(probs, u)
