"""Turns and trajectories: the records every later stage (store, world model, critic, learner) reads."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Source = Literal["real", "imagined"]


@dataclass
class Turn:
    """One agent turn: what it saw, what it did, and what came back."""

    observation: str  # shown to the agent before it acted (raw, without history)
    action: str  # the agent's action text, exactly as produced
    next_observation: str  # the tool result / next observation the env answered with
    reward: float
    done: bool
    valid: bool  # False when the action did not parse; the env answered with an error message
    anchor_observation: str  # raw env state key before acting (GiGPO groups steps on it)


@dataclass
class Trajectory:
    """One episode. All members of a group start from the same env state (same env seed)."""

    env_name: str
    env_kwargs: dict[str, Any]
    seed: int  # the env seed the episode was reset with
    group_id: int
    trajectory_id: int
    source: Source = "real"
    turns: list[Turn] = field(default_factory=list)
    success: bool = False

    @property
    def episode_return(self) -> float:
        """Undiscounted sum of the turn rewards."""
        return float(sum(t.reward for t in self.turns))

    @property
    def num_turns(self) -> int:
        return len(self.turns)

    def to_dict(self) -> dict[str, Any]:
        record = asdict(self)
        record["episode_return"] = self.episode_return
        return record
