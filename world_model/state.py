"""What ``WorldModel`` hands back: the batched latent state and one step's predictions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class WorldState:
    """A batch of agent states inside the world model.

    ``latent`` is everything the model carries forward; ``observations`` (the latest observation
    of each row, as text) is for the caller, e.g. to show the agent, and is never read back.
    """

    latent: torch.Tensor  # (B, D)
    observations: tuple[str, ...]  # (B,)

    def __post_init__(self) -> None:
        object.__setattr__(self, "observations", tuple(self.observations))
        if self.latent.dim() != 2 or self.latent.shape[0] != len(self.observations):
            raise ValueError(
                f"WorldState: latent of shape {tuple(self.latent.shape)} "
                f"for {len(self.observations)} observations"
            )

    def __len__(self) -> int:
        return len(self.observations)

    def select(self, rows: Sequence[int]) -> WorldState:
        """The states of ``rows``, in that order (repeats allowed: branching one state several times)."""
        index = torch.as_tensor(list(rows), dtype=torch.long, device=self.latent.device)
        return WorldState(self.latent[index], tuple(self.observations[i] for i in rows))

    @classmethod
    def concat(cls, states: Sequence[WorldState]) -> WorldState:
        """One batch with the rows of ``states`` in order."""
        return cls(
            torch.cat([s.latent for s in states]), tuple(o for s in states for o in s.observations)
        )  # (sum B, D)


@dataclass(frozen=True)
class Predictions:
    """One imagined step for B rows. Scalars are ensemble means; ``*_std`` and ``uncertainty`` are
    the members' disagreement (``world_model.uncertainty``)."""

    observations: list[str]  # (B,) the sampled next observation (tool result) text
    reward: torch.Tensor  # (B,) mean predicted reward
    done_probability: torch.Tensor  # (B,) mean predicted probability that the episode ended
    done: torch.Tensor  # (B,) bool: done_probability > 0.5 (the heads read the latent after the sampled text)
    uncertainty: torch.Tensor  # (B,) the emitted tokens' mutual information, pooled (max or mean) by the config (nats)
    reward_std: torch.Tensor  # (B,) members' standard deviation of the reward
    done_std: torch.Tensor  # (B,) members' standard deviation of the done probability
    ended: torch.Tensor  # (B,) bool: the observation ended with </s> within the word cap
