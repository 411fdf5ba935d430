"""``EnvConfig``: the ``env`` Hydra group, which environment and its options."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING


@dataclass
class EnvConfig:
    name: str = MISSING
    """An environment name known to ``envs.make`` (hidden_number, frozen_lake, sokoban, minishop)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword options of that environment; unknown ones fail at start with the list of valid ones."""
