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
    ``observation_ids`` is the latest observation as the model read or wrote it, its decoder text
    row ``<s> words </s>`` right-padded to the model's ``max_text_tokens``: the copy memory of a
    decoder with ``copy_observation`` (None for a model without the copy path).
    """

    latent: torch.Tensor  # (B, D)
    observations: tuple[str, ...]  # (B,)
    observation_ids: torch.Tensor | None = None  # (B, S) long, or None

    def __post_init__(self) -> None:
        object.__setattr__(self, "observations", tuple(self.observations))
        if self.latent.dim() != 2 or self.latent.shape[0] != len(self.observations):
            raise ValueError(
                f"WorldState: latent of shape {tuple(self.latent.shape)} "
                f"for {len(self.observations)} observations"
            )
        ids = self.observation_ids
        if ids is not None and (ids.dim() != 2 or ids.shape[0] != len(self.observations)):
            raise ValueError(
                f"WorldState: observation_ids of shape {tuple(ids.shape)} for {len(self.observations)} observations"
            )

    def __len__(self) -> int:
        return len(self.observations)

    def select(self, rows: Sequence[int]) -> WorldState:
        """The states of ``rows``, in that order (repeats allowed: branching one state several times)."""
        index = torch.as_tensor(list(rows), dtype=torch.long, device=self.latent.device)
        ids = None if self.observation_ids is None else self.observation_ids[index]  # (R, S)
        return WorldState(self.latent[index], tuple(self.observations[i] for i in rows), ids)

    @classmethod
    def concat(cls, states: Sequence[WorldState]) -> WorldState:
        """One batch with the rows of ``states`` in order (all with ``observation_ids`` or none)."""
        carried = {s.observation_ids is not None for s in states}
        if len(carried) > 1:
            raise ValueError("WorldState.concat: some states carry observation_ids and some do not")
        ids = torch.cat([s.observation_ids for s in states]) if carried == {True} else None  # (sum B, S)
        return cls(
            torch.cat([s.latent for s in states]), tuple(o for s in states for o in s.observations), ids
        )  # (sum B, D)


@dataclass(frozen=True)
class Predictions:
    """One imagined step for B rows. Scalars are ensemble means; ``*_std`` and ``uncertainty`` are
    the members' disagreement (``world_model.uncertainty``)."""

    observations: list[str]  # (B,) the sampled next observation (tool result) text
    reward: torch.Tensor  # (B,) mean predicted reward
    done_probability: torch.Tensor  # (B,) mean predicted probability that the episode ended
    done: torch.Tensor  # (B,) bool: done_probability > 0.5 (the heads read the latent after the sampled text)
    uncertainty: torch.Tensor  # (B,) the emitted tokens' mutual information, pooled by the config (sum, max or mean; nats)
    reward_std: torch.Tensor  # (B,) members' standard deviation of the reward
    done_std: torch.Tensor  # (B,) members' standard deviation of the done probability
    ended: torch.Tensor  # (B,) bool: the observation ended with </s> within the word cap
