"""What an environment declares it can do, so code and tests ask instead of hard-coding env names.

Every env in ``envs.registry`` has a ``capabilities`` attribute (a class attribute, or a property
when it depends on the options, as for the adapters whose wrapped game decides). Tests read it to
pick which checks apply: an env without an expert is not asked for expert episodes, one without
task keys is split by seed ranges alone, and one whose optional package is missing is skipped with
the command that installs it.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass


@dataclass(frozen=True)
class Capabilities:
    """The optional parts of the env contract one env offers."""

    expert: bool
    """``expert_action()``: a scripted expert (warm start from expert episodes needs one)."""
    task_key: bool
    """``task_key()`` returns a string: episodes draw observable tasks that ``envs.splits`` keeps apart."""
    max_turns_option: bool
    """The constructor takes ``max_turns`` (the env's own turn budget)."""
    snapshots: bool
    """``snapshot()`` / ``restore()``."""
    random_action: bool = True
    """``random_action(rng)``: random well-formed actions (probe episodes, snapshot tests)."""
    extra: str | None = None
    """The optional dependency group (``pip install -e .[extra]``) the env needs, None for none."""


def missing_extra(extra: str | None, module: str | None = None) -> str | None:
    """Why an env cannot be built here (its optional package is absent), or None when it can."""
    if extra is None:
        return None
    if importlib.util.find_spec(module or extra) is None:
        return f"the optional package {module or extra!r} is not installed: pip install -e '.[{extra}]'"
    return None
