"""The world-model seam: what ``DreamEnv``, imagination, the gate, counterfactual step groups, the
bias probes, the reuse example and the benchmark ask of a world model.

Two models satisfy it: the latent ``WorldModel`` (a history latent, O(1) per turn) and the
``LMWorldModel`` (a causal LM writing the next observation over the text history). Callers type
their argument as :class:`WorldModelLike` and never look inside the state, so either model works.

A state is opaque: a batch of B agent states with the latest observation of each row as text
(``observations``), row selection (``select``, repeats allowed, to branch a state) and joining
(``concat_states``, for a stepper that batches several envs). Everything a model does is batched
over rows; ``step`` draws from the caller's ``torch.Generator`` only, so equal generator states
give equal samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, TypeVar, runtime_checkable

import torch

from envs.trajectory import Trajectory
from world_model.state import Predictions
from world_model.turn_tokens import TurnTokenizer

S = TypeVar("S", bound="WorldStateLike")


@runtime_checkable
class WorldStateLike(Protocol):
    """A batch of states inside some world model."""

    observations: tuple[str, ...]
    """(B,) the latest observation of each row, for the caller; never read back by the model."""

    def __len__(self) -> int: ...

    def select(self: S, rows: Sequence[int]) -> S:
        """The states of ``rows``, in that order; repeats allowed."""
        ...

    @classmethod
    def concat(cls: type[S], states: Sequence[S]) -> S:
        """One batch holding the rows of ``states`` in order (all of one model's kind)."""
        ...


@runtime_checkable
class WorldModelLike(Protocol):
    """What every consumer of a world model calls (see the module docstring)."""

    tokenizer: TurnTokenizer
    """The env's word tokenizer with the word caps: observations are compared after these caps, and
    a latent critic built beside the model reads histories with it."""

    @property
    def device(self) -> torch.device: ...

    @property
    def training(self) -> bool: ...

    def train(self, mode: bool = True): ...

    def eval(self): ...

    def initial_state(self, observations: Sequence[str]) -> WorldStateLike:
        """The states after each row's first observation."""
        ...

    def observe(
        self, states: WorldStateLike, actions: Sequence[str], observations: Sequence[str]
    ) -> WorldStateLike:
        """Fold real turns (action, the observation it got back) into the states; nothing is drawn."""
        ...

    def step(
        self, states: WorldStateLike, actions: Sequence[str], *, generator: torch.Generator, greedy: bool = False
    ) -> tuple[WorldStateLike, Predictions]:
        """Imagine one turn per row: the sampled next observation (folded in), reward and done."""
        ...

    def disagreement(
        self, states: WorldStateLike, actions: Sequence[str], observations: Sequence[str]
    ) -> torch.Tensor:
        """``(B,)`` the members' mutual information about given outcomes, per token pooled over each
        observation as the model's config says (``disagreement_score``; default the sum), in nats."""
        ...

    def states_before_turns(self, trajectories: Sequence[Trajectory]) -> WorldStateLike:
        """The state before every played turn of ``trajectories`` (trajectory order, then turn order),
        folded from the true history."""
        ...

    def save_pretrained(self, save_directory: str | Path, **kwargs) -> None: ...


def concat_states(states: Sequence[WorldStateLike]) -> WorldStateLike:
    """Join batches of states of one model kind into one batch, rows in order."""
    if not states:
        raise ValueError("concat_states needs at least one batch of states")
    kind = type(states[0])
    if any(type(s) is not kind for s in states):
        raise ValueError(f"concat_states got states of several kinds: {sorted({type(s).__name__ for s in states})}")
    return kind.concat(list(states))
