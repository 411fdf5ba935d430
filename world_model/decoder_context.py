"""``DecoderContext``: what a decoder call reads besides its own text prefix.

The latent, the query row and, with the copy path, the observation acted in travel together through
every decoding path (``ObservationDecoder``, ``EnsembleDynamics``, ``batched_members``,
``cached_decoding``). The text prefix travels beside it rather than in it: it grows word by word
while the context stays the same.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DecoderContext:
    """B rows of decoder conditioning (shapes below); the copy memory is given exactly when the
    decoders have ``DecoderConfig.copy_observation`` (``decoder.check_previous``)."""

    latent: torch.Tensor  # (B, D) the latent state before the turn
    query_ids: torch.Tensor  # (B, A) "<act> action" (or "<look>") rows
    query_mask: torch.Tensor  # (B, A) 1 on real tokens, 0 on padding
    previous_ids: torch.Tensor | None = None  # (B, O) text rows of the observation acted in (copy path)
    previous_mask: torch.Tensor | None = None  # (B, O) 1 on real tokens, 0 on padding

    def select(self, rows: torch.Tensor) -> DecoderContext:
        """The context of the rows ``rows`` indexes, in its order."""
        if self.previous_ids is None:
            return DecoderContext(self.latent[rows], self.query_ids[rows], self.query_mask[rows])
        previous = self.previous_ids[rows], self.previous_mask[rows]
        return DecoderContext(self.latent[rows], self.query_ids[rows], self.query_mask[rows], *previous)
