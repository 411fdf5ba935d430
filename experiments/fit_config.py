"""Structured Hydra config of ``experiments/fit_world_model.py``: fit a world model on expert and random data.

Groups: ``env/`` (the same options and ``EnvConfig`` schema as ``train.py``) and ``world_model/``
(``WorldModelOptions``); plus ``data.*`` (``DataConfig``), ``fit.*`` (``FitSettings``, the settings of
every world-model fit, ``world_model.fit_settings``) and ``seed``.
A typo'd key or a wrong type fails at start with Hydra's message; ``validate_fit`` then builds the
dataclasses so each ``__post_init__`` checks its ranges, naming the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig

from envs.checks import check_int
from envs.config import EnvConfig
from experiments.init_models import check_saved
from experiments.resolve import validate
from world_model.config import WorldModelOptions
from world_model.fit_settings import FitSettings


@dataclass
class DataConfig:
    episodes: int = 2000
    """Real episodes collected, one per env seed, training and validation together."""
    expert_fraction: float = 0.5
    """Share of episodes played by the scripted expert; the rest by a uniformly random agent."""
    val_fraction: float = 0.1
    """Share of episodes (of env seeds) held out for validation; at least one when > 0."""
    max_turns: int | None = None
    """Turn cap per episode; None uses the env's own."""
    seed: int | None = None
    """Seed of the env-seed draws and the random agent; None derives it from the run's ``seed``."""

    def __post_init__(self) -> None:
        check_int("data.episodes", self.episodes, 2)
        check_int("data.max_turns", self.max_turns, 1, optional=True)
        if not 0.0 <= self.expert_fraction <= 1.0:
            raise ValueError(f"data.expert_fraction must be in [0, 1], got {self.expert_fraction}")
        if not 0.0 <= self.val_fraction < 1.0:
            raise ValueError(f"data.val_fraction must be in [0, 1), got {self.val_fraction}")


@dataclass
class FitWorldModelConfig:
    env: Any = MISSING
    world_model: Any = MISSING
    data: DataConfig = field(default_factory=DataConfig)
    fit: FitSettings = field(default_factory=FitSettings)
    seed: int = 0
    """The one seed: env seeds, model init and shuffling derive from it."""


@dataclass
class ResolvedFit:
    """The validated dataclasses of one fit."""

    env: EnvConfig
    world_model: WorldModelOptions
    data: DataConfig
    fit: FitSettings
    seed: int


def register_fit_configs() -> None:
    store = ConfigStore.instance()
    store.store(name="fit_world_model_schema", node=FitWorldModelConfig)
    store.store(group="env", name="env_schema", node=EnvConfig)
    store.store(group="world_model", name="world_model_schema", node=WorldModelOptions)


def validate_fit(cfg: DictConfig) -> ResolvedFit:
    """Build every dataclass (running its ``__post_init__`` checks) from a composed config, then check
    the saved world model it starts from (``world_model.init``)."""
    run = validate(cfg, ResolvedFit)
    if run.world_model.init is not None:
        check_saved(run.world_model.init, "world_model", run.env.name, run.env.kwargs)
    return run
