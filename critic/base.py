"""The turn-level critic seam: a batch of agent states in, one value per state out.

Turn-level PPO (``ppo_turn``) asks a critic for the value of the state before each turn and, for an
episode truncated by the turn cap, of the state after its last turn. Episodes that ended ``done``
bootstrap 0 and need no value. The token critic (reads the prompt ids) and the latent critic (reads
the history) both sit behind ``TurnCritic``, so either can be handed to the learner.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import torch

from envs.trajectory import Trajectory


@dataclass(init=False)
class CriticStates:
    """A batch of N agent states, each the history the agent had seen before acting.

    For bootstrapping at a truncation, a state is the history after the episode's last turn.
    """

    input_ids: torch.Tensor  # (N, P) long
    """The prompt ids exactly as the policy saw them, left-padded so every row ends at the last column."""
    attention_mask: torch.Tensor  # (N, P) long, 0 on padding
    """1 on real prompt tokens, 0 on the left padding."""
    # A field the constructor sets by hand (init=False): Lightning's mixed-precision input conversion walks
    # every init field of a dataclass argument and refuses the frozen Trajectory objects it would meet here.
    histories: list[tuple[Trajectory, int]] | None = field(default=None, init=False)
    """Per row ``(trajectory, k)``: the state after turn ``k - 1``'s result and before turn ``k``
    (``k`` completed turns, ``0 <= k <= num_turns``; ``k = num_turns`` is the state after the last
    turn). None when no critic in use reads histories."""

    def __init__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                 histories: list[tuple[Trajectory, int]] | None = None) -> None:
        self.input_ids, self.attention_mask, self.histories = input_ids, attention_mask, histories
        self.__post_init__()

    def __post_init__(self) -> None:
        if self.input_ids.dim() != 2 or self.input_ids.shape != self.attention_mask.shape:
            raise ValueError(
                f"input_ids {tuple(self.input_ids.shape)} and attention_mask {tuple(self.attention_mask.shape)} "
                "must share an (N, P) shape"
            )
        if self.histories is not None:
            if len(self.histories) != len(self):
                raise ValueError(f"histories has {len(self.histories)} entries for {len(self)} rows")
            for row, (trajectory, k) in enumerate(self.histories):
                if not 0 <= k <= trajectory.num_turns:
                    raise ValueError(
                        f"histories[{row}]: k={k} completed turns is outside [0, {trajectory.num_turns}]"
                    )

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def to(self, device: torch.device | str) -> CriticStates:
        """The same states with their tensors on ``device``; histories are shared, not copied."""
        return CriticStates(self.input_ids.to(device), self.attention_mask.to(device), self.histories)

    def index(self, rows: torch.Tensor) -> CriticStates:
        """The sub-batch of the given row indices (a 1-D long tensor, or a boolean row mask)."""
        if rows.dtype == torch.bool:
            rows = rows.nonzero().flatten()  # (n,)
        histories = None if self.histories is None else [self.histories[i] for i in rows.tolist()]
        return CriticStates(self.input_ids[rows], self.attention_mask[rows], histories)


@runtime_checkable
class TurnCritic(Protocol):
    """A critic of agent states: an ``nn.Module`` whose forward maps ``CriticStates`` to values.

    ``V(s)`` estimates the discounted return from state ``s`` on: the sum over the turns still to
    come of ``gamma ** j * r_j``, under the policy that collected the data. Calling it follows
    ``nn.Module`` rules: gradients flow when enabled, ``train()`` / ``eval()`` switch modes.
    """

    def __call__(self, states: CriticStates) -> torch.Tensor:
        """``(N,)`` float values, one per state."""
        ...

    def forward(self, states: CriticStates) -> torch.Tensor:
        """``(N,)`` float values, one per state."""
        ...

    def parameters(self, recurse: bool = True):
        """The trainable parameters, as on any ``nn.Module``."""
        ...
