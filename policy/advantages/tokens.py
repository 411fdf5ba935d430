"""Per-token helpers the estimators share: a row's scalar spread over its action tokens, and verl's
masked whitening of token advantages."""

from __future__ import annotations

import torch


def broadcast_to_tokens(adv: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """A per-sample scalar spread over its response tokens: (B,) x (B, T) -> (B, T), 0 off the mask."""
    if adv.dim() != 1 or adv.shape[0] != response_mask.shape[0]:
        raise ValueError(f"adv {tuple(adv.shape)} must be (B,) for response_mask {tuple(response_mask.shape)}")
    return adv.unsqueeze(-1) * response_mask.to(adv.dtype)  # (B, T)


def whiten(values: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True) -> torch.Tensor:
    """``(x - mean) / sqrt(var + 1e-8)`` with the mean and unbiased variance of the valid entries.

    values, mask: same shape. Like verl's ``masked_whiten``, every entry is transformed (masked ones
    too) and ``shift_mean=False`` adds the mean back. Fewer than two valid entries leave the
    unbiased variance undefined: ``ValueError`` (verl raises there too).
    """
    m = mask.to(values.dtype)
    n = m.sum()
    if n < 2:
        raise ValueError(f"whiten needs at least 2 valid entries, mask has {n.item():g}")
    mean = (values * m).sum() / n
    var = ((values - mean) ** 2 * m).sum() / (n - 1)
    out = (values - mean) * torch.rsqrt(var + 1e-8)
    return out if shift_mean else out + mean
