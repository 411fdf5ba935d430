"""Structured Hydra config of ``experiments/fit_world_model.py``: fit a world model on expert and random data.

Groups: ``env/`` (the same options and ``EnvConfig`` schema as ``train.py``) and ``world_model/``
(``WorldModelOptions``); plus ``data.*`` (``DataConfig``), ``fit.*`` (``FitConfig``) and ``seed``.
A typo'd key or a wrong type fails at start with Hydra's message; ``validate_fit`` then builds the
dataclasses so each ``__post_init__`` checks its ranges, naming the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from envs.checks import check_int
from envs.config import EnvConfig
from world_model.config import WorldModelOptions


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
class FitConfig:
    steps: int = 2000
    """Optimiser steps (AdamW)."""
    max_epochs: int | None = None
    """Also stop after this many passes over the training episodes (None: steps alone)."""
    batch_size: int = 32
    """Episodes per batch (one row per episode, every turn scored)."""
    lr: float = 1e-3
    """AdamW learning rate."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    val_every_steps: int | None = None
    """Steps between validation passes (None: at the end of every epoch)."""
    progress: bool = True
    """Show progress bars."""

    def __post_init__(self) -> None:
        check_int("fit.steps", self.steps, 1)
        check_int("fit.batch_size", self.batch_size, 1)
        check_int("fit.max_epochs", self.max_epochs, 1, optional=True)
        check_int("fit.val_every_steps", self.val_every_steps, 1, optional=True)
        if not self.lr > 0:
            raise ValueError(f"fit.lr must be > 0, got {self.lr}")
        if not self.weight_decay >= 0:
            raise ValueError(f"fit.weight_decay must be >= 0, got {self.weight_decay}")


@dataclass
class FitWorldModelConfig:
    env: Any = MISSING
    world_model: Any = MISSING
    data: DataConfig = field(default_factory=DataConfig)
    fit: FitConfig = field(default_factory=FitConfig)
    seed: int = 0
    """The one seed: env seeds, model init and shuffling derive from it."""


@dataclass
class ResolvedFit:
    """The validated dataclasses of one fit."""

    env: EnvConfig
    world_model: WorldModelOptions
    data: DataConfig
    fit: FitConfig
    seed: int


def register_fit_configs() -> None:
    store = ConfigStore.instance()
    store.store(name="fit_world_model_schema", node=FitWorldModelConfig)
    store.store(group="env", name="env_schema", node=EnvConfig)
    store.store(group="world_model", name="world_model_schema", node=WorldModelOptions)


def validate_fit(cfg: DictConfig) -> ResolvedFit:
    """Build every dataclass (running its ``__post_init__`` checks) from a composed config."""
    return ResolvedFit(
        env=OmegaConf.to_object(cfg.env),
        world_model=OmegaConf.to_object(cfg.world_model),
        data=OmegaConf.to_object(cfg.data),
        fit=OmegaConf.to_object(cfg.fit),
        seed=int(cfg.seed),
    )
