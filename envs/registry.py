"""``make(name, **kwargs)``: the four environments by name, from an explicit dict; ``action_validator``
/ ``action_is_valid``: whether an action text is well formed for an env, from the env's own parser."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from envs.base import RealEnv
from envs.frozen_lake import FrozenLakeEnv
from envs.frozen_lake import parse_action as parse_frozen_lake
from envs.hidden_number import HiddenNumberEnv, parse_guess
from envs.minishop import MiniShop
from envs.minishop import parse_action as parse_minishop
from envs.sokoban import SokobanEnv
from envs.sokoban import parse_action as parse_sokoban

ENVIRONMENTS: dict[str, type] = {
    "hidden_number": HiddenNumberEnv,
    "frozen_lake": FrozenLakeEnv,
    "sokoban": SokobanEnv,
    "minishop": MiniShop,
}
# Each env's own action parser (None: malformed), for ``action_validator``; hidden_number's also
# needs the option n, so it is handled there.
_PARSERS: dict[str, Callable[[str], object]] = {
    "frozen_lake": parse_frozen_lake,
    "sokoban": parse_sokoban,
    "minishop": parse_minishop,
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


def action_validator(name: str, env_kwargs: dict[str, Any] | None = None) -> Callable[[str], bool]:
    """``text -> bool``: whether env ``name`` built with ``env_kwargs`` would take ``text`` as well formed.

    Built on each env's own parser, so it agrees with the real env's ``info["valid"]`` wherever
    validity depends on the text and the options alone: hidden_number (``guess(k)`` with k in
    ``1 .. n``), frozen_lake and sokoban (one of the four moves). Minishop's real ``valid`` also
    needs the action to be offered on the current page, which the text cannot show; here it means
    the action parses (``search[...]`` / ``click[...]``), so a real valid action is always accepted.
    A learned world model standing in for the env (which has no page state) marks validity with it.
    """
    env = make(name, **dict(env_kwargs or {}))  # checks the name and options; gives hidden_number's n
    if name == "hidden_number":
        n = env.n
        return lambda text: (k := parse_guess(text)) is not None and 1 <= k <= n
    if name not in _PARSERS:
        raise ValueError(f"no action parser registered for environment {name!r}")
    parse = _PARSERS[name]
    return lambda text: parse(text) is not None


def action_is_valid(name: str, env_kwargs: dict[str, Any] | None, text: str) -> bool:
    """``action_validator(name, env_kwargs)(text)``; build the validator once when checking many."""
    return action_validator(name, env_kwargs)(text)
