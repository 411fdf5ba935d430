"""The world-model kinds (``world_model.name``): one explicit table that config validation, building,
fitting and loading all read, so a new kind is one entry here rather than a branch in each of them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import torch

from world_model.config import WorldModelOptions
from world_model.ensemble_options import EnsembleOptions
from world_model.lightning_module import fit_world_model
from world_model.lm.config import LMWorldModelConfig
from world_model.lm.fit import fit_lm_world_model
from world_model.lm.model import LMWorldModel
from world_model.model import WorldModel, WorldModelConfig
from world_model.turn_tokens import TurnTokenizer


@dataclass(frozen=True)
class WorldModelKind:
    """How one kind of world model is built, fitted and loaded."""

    model: type
    """Its class; ``model.from_pretrained(folder)`` loads a saved one."""
    build: Callable[..., Any]
    """``(options, tokenizer, seed, device="cpu")`` -> a fresh model over ``tokenizer``'s words
    (``tokenizer`` already applies the options' word caps) on ``device``, the trainer's in a run, unless
    the options pin one."""
    fit: Callable[..., dict[str, float]]
    """Its Lightning fit: ``(train, val, model, **keywords)``, the same keywords and returned keys for
    every kind."""


def _build_latent(options: WorldModelOptions, tokenizer: TurnTokenizer, seed: int,
                  device: str | torch.device = "cpu") -> WorldModel:
    """Reads the keys ``KIND_KEYS["latent"]`` lists (``world_model.config``; any other set is refused there)."""
    return WorldModel(WorldModelConfig.from_options(tokenizer, options), tokenizer, seed=seed).to(device)


def _build_lm(options: WorldModelOptions, tokenizer: TurnTokenizer, seed: int,
              device: str | torch.device = "cpu") -> LMWorldModel:
    """Reads the keys ``KIND_KEYS["lm"]`` lists: the ``lm`` section, the word caps (in ``tokenizer``) and
    the ensemble options (``bootstrap`` acts in the fit)."""
    ensemble = {f.name: getattr(options, f.name) for f in fields(EnsembleOptions)}  # declared once
    config = LMWorldModelConfig(options.lm, tokenizer.limits.observation, tokenizer.limits.action, len(tokenizer),
                                **ensemble)
    return LMWorldModel(config, tokenizer, seed=seed).to(options.lm.device or device)  # lm.device pins it


KINDS: dict[str, WorldModelKind] = {
    "latent": WorldModelKind(model=WorldModel, build=_build_latent, fit=fit_world_model),
    "lm": WorldModelKind(model=LMWorldModel, build=_build_lm, fit=fit_lm_world_model),
}
"""``world_model.name`` (and a saved config.json's ``kind``) -> the kind."""


def kind_named(name: str, key: str = "world_model.name") -> WorldModelKind:
    """The kind called ``name``; a ``ValueError`` naming ``key`` when there is none."""
    if name not in KINDS:
        raise ValueError(f"{key} must be one of {tuple(KINDS)}, got {name!r}")
    return KINDS[name]


def kind_of(model: Any) -> WorldModelKind:
    """The kind whose class ``model`` is (exactly: a subclass may fit differently)."""
    for kind in KINDS.values():
        if type(model) is kind.model:
            return kind
    raise TypeError(f"no fit known for {type(model).__name__}; known: {sorted(k.model.__name__ for k in KINDS.values())}")
