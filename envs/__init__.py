"""Reverie's text environments and the rollout data they produce.

``import envs`` gives the public names: ``envs.make("sokoban")``, ``envs.collect(...)``,
``envs.Trajectory``, ``envs.TrajectoryStore``, ... The rollout records and ``collect`` are imported
here; ``make``, ``split_seeds`` and the agent mix (they import every environment), the store
(``datasets``) and chat I/O on first use (PEP 562), so importing one submodule such as ``envs.base``
stays cheap.

``collect`` is imported eagerly on purpose: it shares its name with the submodule ``envs.collect``,
and importing that submodule later would otherwise leave ``envs.collect`` naming the module.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from envs.agent import Agent, AgentView, ExpertAgent, RandomAgent
from envs.base import Env, EpisodeDoneError, StepResult
from envs.collect import BranchReplayError, EnvFailure, collect, count_env_steps, group_env_seed
from envs.trajectory import (
    SampledAction,
    Trajectory,
    Turn,
    check_unique_ids,
    merge_trajectories,
    next_ids,
)

# public name -> the submodule that defines it, imported on first use
_LAZY = {
    "make": "envs.registry",
    "ENVIRONMENTS": "envs.registry",
    "TrajectoryStore": "envs.store",
    "StoreError": "envs.store",
    "export_chat_jsonl": "envs.chat",
    "import_chat_jsonl": "envs.chat",
    "ChatFormatError": "envs.chat",
    "split_seeds": "envs.splits",
    "NoisyExpertAgent": "envs.mixed_agents",
    "collect_mix": "envs.mixed_agents",
}

__all__ = [
    "Agent",
    "AgentView",
    "BranchReplayError",
    "Env",
    "EnvFailure",
    "EpisodeDoneError",
    "ExpertAgent",
    "RandomAgent",
    "SampledAction",
    "StepResult",
    "Trajectory",
    "Turn",
    "check_unique_ids",
    "collect",
    "count_env_steps",
    "group_env_seed",
    "merge_trajectories",
    "next_ids",
    # imported on first use (_LAZY)
    "ENVIRONMENTS",
    "ChatFormatError",
    "NoisyExpertAgent",
    "StoreError",
    "TrajectoryStore",
    "collect_mix",
    "export_chat_jsonl",
    "import_chat_jsonl",
    "make",
    "split_seeds",
]

if TYPE_CHECKING:  # what type checkers see; at run time __getattr__ imports these
    from envs.chat import ChatFormatError, export_chat_jsonl, import_chat_jsonl
    from envs.mixed_agents import NoisyExpertAgent, collect_mix
    from envs.registry import ENVIRONMENTS, make
    from envs.splits import split_seeds
    from envs.store import StoreError, TrajectoryStore


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'envs' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
