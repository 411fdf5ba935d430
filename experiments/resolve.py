"""``validate``: a composed Hydra config -> its dataclasses, for every entry point (``train.py``'s
``Resolved`` and ``fit_world_model.py``'s ``ResolvedFit``)."""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import TypeVar

from omegaconf import DictConfig, OmegaConf

R = TypeVar("R")


def validate(cfg: DictConfig, resolved: type[R]) -> R:
    """``resolved`` built from ``cfg``: each group through ``OmegaConf.to_object`` (which runs its
    dataclass's ``__post_init__`` checks, naming the key), ``seed`` as an int, other plain values as
    they are; a field with a default may be absent from ``cfg``."""
    values = {}
    for f in fields(resolved):
        if f.name not in cfg and f.default is not MISSING:
            continue
        value = cfg[f.name]
        values[f.name] = OmegaConf.to_object(value) if isinstance(value, DictConfig) else value
    values["seed"] = int(cfg.seed)
    return resolved(**values)
