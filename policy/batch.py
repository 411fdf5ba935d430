"""The token batch the learner trains on: one row per agent turn."""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch


@dataclass
class TokenBatch:
    """Rows are (prompt, action) pairs, left-padded so every row ends at the last column.

    ``response_mask`` is 1 exactly on the tokens the agent produced for this turn (its action
    tokens and the closing EOS): never on the rendered history, observations or tool results.
    """

    input_ids: torch.Tensor  # (B, L) long
    attention_mask: torch.Tensor  # (B, L) long, 0 on padding
    response_mask: torch.Tensor  # (B, L) float, 1 on trained action tokens

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def index(self, rows: torch.Tensor) -> TokenBatch:
        """The sub-batch of the given row indices."""
        return TokenBatch(**{f.name: getattr(self, f.name)[rows] for f in fields(self)})

    def to(self, device: torch.device | str) -> TokenBatch:
        return TokenBatch(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})
