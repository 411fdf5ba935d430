"""Decoding as an edit: a logit bonus for the word at the same place in the observation acted in.

The copy path puts the words of the observation acted in into the decoder's memory, but the decoder
still has to learn, place by place, to find the word at its own position and repeat it. On a grid
nearly every word is that word; only the cells the action touched change. With ``aligned_copy`` each
text position adds a learned non-negative bonus (``softplus`` of a linear map of the decoder's final
state) to the logit of the word the observation acted in has at the place being predicted. "Nothing
changed here" is then the starting guess, and the decoder's layers learn only where the text differs
and how, which is what a grid step is. Where the observation acted in has no word at that place
(it is shorter, or a ``<look>`` row's empty memory), there is no bonus.

The functions are the shared math of the three decoding paths (the plain forward, the member-batched
fit and the cached sampler), so they agree by construction.
"""

from __future__ import annotations

import torch


def aligned_words(
    previous_ids: torch.Tensor, previous_mask: torch.Tensor, rows: torch.Tensor, positions: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The word the ``(B, O)`` copy memory holds at the place each logit predicts, and whether there is one.

    ``rows`` and ``positions`` (same shape, any) index text positions ``s`` of rows ``b``. Logits at
    position ``s`` predict text token ``s + 1``, so the aligned word is ``previous_ids[b, s + 1]``;
    it is missing (valid False) past the end of the memory row or on its padding.
    """
    width = previous_ids.shape[1]
    place = positions + 1  # the text token the logits at ``positions`` predict
    inside = place < width
    place = place.clamp(max=width - 1)
    ids = previous_ids[rows, place]  # (...)
    valid = inside & previous_mask[rows, place].bool()  # (...)
    return ids, valid


def add_copy_bonus(
    logits: torch.Tensor, bonus: torch.Tensor, ids: torch.Tensor, valid: torch.Tensor
) -> torch.Tensor:
    """``(..., V)`` logits with ``bonus`` (``(...)``) added to the logit of word ``ids`` (``(...)``) where
    ``valid``; a new tensor (differentiable in both)."""
    return logits.scatter_add(-1, ids.unsqueeze(-1), (bonus * valid).unsqueeze(-1))  # (..., V)
