"""Drawing one token per row from given probabilities, by inverting each row's cumulative sum.

``torch.multinomial`` draws the same thing but costs far more per call on small CPU batches than
the three tensor ops below, and the decoder draws once per generated token. One uniform number per
row comes from the caller's ``torch.Generator``, so equal generator states give equal draws.
"""

from __future__ import annotations

import torch


def inverse_cdf_sample(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """``(B, V)`` non-negative weights, each row with a positive sum (it need not be 1) -> ``(B,)`` drawn indices.

    Index ``i`` is drawn with probability ``probs[b, i] / probs[b].sum()``; an index of weight 0 is
    never drawn: the draw is the first index whose running sum exceeds ``u * total`` with ``u`` in
    ``[0, 1)``, and a zero weight does not raise the running sum past the index before it.
    """
    if probs.dim() != 2:
        raise ValueError(f"inverse_cdf_sample expects (B, V) weights, got shape {tuple(probs.shape)}")
    running = probs.cumsum(dim=-1)  # (B, V)
    # ``torch.rand`` gives u <= 1 - 2**-24 (float32) or 1 - 2**-53 (float64), and under round-to-nearest
    # such a u times total still rounds below total = running[:, -1]: a running sum above it exists.
    threshold = (
        torch.rand((probs.shape[0], 1), generator=generator, device=probs.device, dtype=running.dtype)
        * running[:, -1:]
    )  # (B, 1)
    return torch.searchsorted(running, threshold, right=True).squeeze(1)  # (B,)
