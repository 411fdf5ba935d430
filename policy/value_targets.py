"""What the learner's critic is trained toward in one update, at the level its algorithm works on.

- ``token`` (``ppo_token``): a value per action token, ``(B, L)`` like the token batch; the critic's
  per-position values are aligned with ``critic.token_values``.
- ``turn`` (``ppo_turn``): one value per row, ``(B,)``, of the state before the turn (the critic reads
  ``states``); clipped around ``old_values`` as verl clips token values.
- ``sequence`` (``sppo``): one value per episode, the state before its first trained turn; the
  critic's output is a logit, trained with binary cross-entropy toward the return in [0, 1]; only
  rows with ``mask`` 1 (each trajectory's first row) carry that loss.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from critic import CriticStates

VALUE_LEVELS = ("token", "turn", "sequence")


@dataclass
class ValueTargets:
    level: str  # one of VALUE_LEVELS
    returns: torch.Tensor  # (B, L) at token level, else (B,)
    old_values: torch.Tensor | None = None  # same shape as returns; None at sequence level
    states: CriticStates | None = None  # the state before each row's turn (turn and sequence levels)
    mask: torch.Tensor | None = None  # (B,) rows that carry the value loss (sequence level); None: all

    def __post_init__(self) -> None:
        if self.level not in VALUE_LEVELS:
            raise ValueError(f"ValueTargets.level must be one of {VALUE_LEVELS}, got {self.level!r}")
        if self.level != "token" and self.states is None:
            raise ValueError(f"ValueTargets at {self.level} level need the critic states of the rows")
        if self.level != "sequence" and self.old_values is None:
            raise ValueError(f"ValueTargets at {self.level} level need old_values for the clipped value loss")
        if self.old_values is not None and self.old_values.shape != self.returns.shape:
            raise ValueError(
                f"old_values {tuple(self.old_values.shape)} and returns {tuple(self.returns.shape)} differ in shape"
            )

    def row_mask(self) -> torch.Tensor:
        """(B,) float: the rows whose value is trained (all of them unless ``mask`` says otherwise)."""
        rows = self.returns.shape[0]
        return torch.ones(rows) if self.mask is None else self.mask.float()
