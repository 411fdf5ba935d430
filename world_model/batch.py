"""``WorldModelBatch``: teacher-forced training rows built from recorded trajectories
(``world_model.trajectory_rows`` builds them).

One row per trajectory rather than per turn: the encoder runs over each history once and yields
the latent before every turn (``LatentStateEncoder.states``), so turn ``t``'s example (history up
to ``t``, action ``t``, next observation ``t``, reward ``t``, done ``t``) costs no second pass over
its prefix. Tensors are right-padded (``turn_tokens``); N is the longest trajectory's turn count.

What is scored:

- ``outcome_mask[b, t]``: turn ``t`` of trajectory ``b`` is real and was played in this
  trajectory (``t >= branch_turn``); a restored branch prefix is history only, its turns were
  scored in the trajectory they were copied from;
- ``latent_mask[b, k]``: the latent after ``k`` turns is trained to rewrite the observation seen
  then (``text_ids[b, k]``) for ``branch_turn <= k <= num_turns``.

Turn ``t``'s previous observation (the one its action was taken in, the copy memory of a decoder
with ``copy_observation``) is ``text_ids[b, t]``, the text row before its target ``text_ids[b, t +
1]``: ``previous_ids`` / ``previous_mask`` give that ``(B, N, S)`` view, so no row is stored twice.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch


@dataclass(frozen=True)
class WorldModelBatch:
    """B trajectories of at most N turns, as padded id tensors (shapes below)."""

    observation_ids: torch.Tensor  # (B, T0) encoder rows of the first observation
    observation_mask: torch.Tensor  # (B, T0)
    turn_ids: torch.Tensor  # (B, N, T) encoder turn rows
    turn_mask: torch.Tensor  # (B, N, T)
    turn_count: torch.Tensor  # (B,) turns per trajectory
    query_ids: torch.Tensor  # (B, N, A) decoder queries "<act> action"
    query_mask: torch.Tensor  # (B, N, A)
    text_ids: torch.Tensor  # (B, N + 1, S) decoder rows of the observation seen after k turns
    text_mask: torch.Tensor  # (B, N + 1, S)
    rewards: torch.Tensor  # (B, N) float
    dones: torch.Tensor  # (B, N) float 0/1
    outcome_mask: torch.Tensor  # (B, N) bool: turns scored for next observation, reward and done
    latent_mask: torch.Tensor  # (B, N + 1) bool: latents scored for rewriting the current observation

    def to(self, device: torch.device | str) -> WorldModelBatch:
        return WorldModelBatch(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})

    @property
    def previous_ids(self) -> torch.Tensor:
        """``(B, N, S)`` the text row of the observation each turn's action was taken in."""
        return self.text_ids[:, :-1]

    @property
    def previous_mask(self) -> torch.Tensor:
        """``(B, N, S)`` its mask."""
        return self.text_mask[:, :-1]

    @property
    def num_outcomes(self) -> int:
        return int(self.outcome_mask.sum())
