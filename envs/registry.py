"""``make(name, **kwargs)``: the four environments by name, from an explicit dict."""

from __future__ import annotations

import inspect
from typing import Any

from envs.base import RealEnv
from envs.frozen_lake import FrozenLakeEnv
from envs.hidden_number import HiddenNumberEnv
from envs.minishop import MiniShop
from envs.sokoban import SokobanEnv

ENVIRONMENTS: dict[str, type] = {
    "hidden_number": HiddenNumberEnv,
    "frozen_lake": FrozenLakeEnv,
    "sokoban": SokobanEnv,
    "minishop": MiniShop,
}


def env_options(name: str) -> list[str]:
    """The keyword options an environment accepts."""
    parameters = inspect.signature(ENVIRONMENTS[name]).parameters.values()
    return [p.name for p in parameters if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]


def make(name: str, **kwargs: Any) -> RealEnv:
    """Build environment ``name`` with its keyword options; unknown names or options fail clearly."""
    if name not in ENVIRONMENTS:
        raise ValueError(f"unknown environment {name!r}; valid names: {', '.join(sorted(ENVIRONMENTS))}")
    valid = env_options(name)
    unknown = sorted(set(kwargs) - set(valid))
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for environment {name!r}; valid options: {', '.join(valid)}")
    return ENVIRONMENTS[name](**kwargs)
