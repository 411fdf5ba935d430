"""``EnvConfig``: the ``env`` Hydra group, which environment and its options."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING


@dataclass
class EnvConfig:
    name: str = MISSING
    """An environment name known to ``envs.make``: hidden_number, frozen_lake, sokoban, minishop, or an
    adapter, textarena (``kwargs.game``) or gym_text (``kwargs.entry_point``)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword options of that environment; unknown ones fail at start with the list of valid ones."""
    success_reward: float | None = None
    """The world model's reward above which an imagined episode's last step counts as a success; None
    uses the env's own rule (``imagination.dream_env.SUCCESS_REWARD``, or an adapter's threshold)."""

    def __post_init__(self) -> None:
        value = self.success_reward
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ValueError(f"env.success_reward must be a number or null, got {value!r}")
