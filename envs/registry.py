"""``make(name, **kwargs)``: the four hand-written environments and the two adapters (TextArena games,
gymnasium-style text envs) by name, from explicit dicts; ``action_validator`` / ``action_is_valid``:
whether an action text is well formed for an env, from the env's own parser."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from envs.base import Env
from envs.capabilities import Capabilities, missing_extra
from envs.frozen_lake import FrozenLakeEnv
from envs.frozen_lake import parse_action as parse_frozen_lake
from envs.gym_text import GymTextEnv
from envs.hidden_number import HiddenNumberEnv, parse_guess
from envs.minishop import MiniShop
from envs.minishop import parse_action as parse_minishop
from envs.sokoban import SokobanEnv
from envs.sokoban import parse_action as parse_sokoban
from envs.textarena_env import TextArenaEnv

ENVIRONMENTS: dict[str, type] = {
    "hidden_number": HiddenNumberEnv,
    "frozen_lake": FrozenLakeEnv,
    "sokoban": SokobanEnv,
    "minishop": MiniShop,
}
# Envs wrapping code Reverie did not write; what they offer depends on what they wrap (``capabilities``).
# Kept apart from ENVIRONMENTS, which tools iterate over as the scripted simulators.
ADAPTERS: dict[str, type] = {
    "textarena": TextArenaEnv,
    "gym_text": GymTextEnv,
}
# Each env's own action parser (None: malformed), for ``action_validator``; hidden_number's also
# needs the option n, so it is handled there.
_PARSERS: dict[str, Callable[[str], object]] = {
    "frozen_lake": parse_frozen_lake,
    "sokoban": parse_sokoban,
    "minishop": parse_minishop,
}


def env_class(name: str) -> type:
    """The class registered under ``name``; ValueError listing the valid names."""
    known = {**ENVIRONMENTS, **ADAPTERS}
    if name not in known:
        raise ValueError(f"unknown environment {name!r}; valid names: {', '.join(sorted(known))}")
    return known[name]


def env_names() -> list[str]:
    """Every registered name, scripted envs and adapters."""
    return sorted({**ENVIRONMENTS, **ADAPTERS})


def unavailable(name: str) -> str | None:
    """Why env ``name`` cannot be built here (its optional package is missing), or None."""
    return missing_extra(getattr(env_class(name), "extra", None))


def capabilities(name: str, **kwargs: Any) -> Capabilities:
    """What env ``name`` built with ``kwargs`` offers (an adapter's depend on what it wraps)."""
    declared = env_class(name).__dict__.get("capabilities")
    return declared if isinstance(declared, Capabilities) else make(name, **kwargs).capabilities


def env_options(name: str) -> list[str]:
    """The keyword options an environment accepts."""
    parameters = inspect.signature(env_class(name)).parameters.values()
    return [p.name for p in parameters if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]


def make(name: str, **kwargs: Any) -> Env:
    """Build environment ``name`` with its keyword options; unknown names or options fail clearly."""
    cls = env_class(name)
    valid = env_options(name)
    unknown = sorted(set(kwargs) - set(valid))
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for environment {name!r}; valid options: {', '.join(valid)}")
    return cls(**kwargs)


def action_validator(name: str, env_kwargs: dict[str, Any] | None = None) -> Callable[[str], bool]:
    """``text -> bool``: whether env ``name`` built with ``env_kwargs`` would take ``text`` as well formed.

    Built on each env's own parser, so it agrees with the real env's ``info["valid"]`` wherever
    validity depends on the text and the options alone: hidden_number (``guess(k)`` with k in
    ``1 .. n``), frozen_lake and sokoban (one of the four moves). Minishop's real ``valid`` also
    needs the action to be offered on the current page, which the text cannot show; here it means
    the action parses (``search[...]`` / ``click[...]``), so a real valid action is always accepted.
    A learned world model standing in for the env (which has no page state) marks validity with it.
    For the adapters it is the wrapped game's format where known (TextArena's listed games, a
    gymnasium-style env with ``is_well_formed``), else every text: the game decides validity in play.
    """
    env = make(name, **dict(env_kwargs or {}))  # checks the name and options; gives hidden_number's n
    if name == "hidden_number":
        n = env.n
        return lambda text: (k := parse_guess(text)) is not None and 1 <= k <= n
    if name in ADAPTERS:  # the wrapped game's own format, where the adapter knows it
        return env.is_well_formed
    if name not in _PARSERS:
        raise ValueError(f"no action parser registered for environment {name!r}")
    parse = _PARSERS[name]
    return lambda text: parse(text) is not None


def action_is_valid(name: str, env_kwargs: dict[str, Any] | None, text: str) -> bool:
    """``action_validator(name, env_kwargs)(text)``; build the validator once when checking many."""
    return action_validator(name, env_kwargs)(text)
