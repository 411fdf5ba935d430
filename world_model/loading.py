"""Loading a saved world model of either kind from its folder (``config.json`` says which)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from world_model.kinds import KINDS
from world_model.lm.model import refuse_pickles


def load_world_model(folder: str | os.PathLike):
    """The model saved in ``folder`` by either kind's ``save_pretrained`` (safetensors weights only)."""
    folder = Path(folder)
    config = folder / "config.json"
    if not config.is_file():
        raise FileNotFoundError(f"{config} not found: not a folder written by a world model's save_pretrained")
    refuse_pickles(folder)
    kind = json.loads(config.read_text()).get("kind", "latent")  # a latent model's config has no ``kind``
    if kind not in KINDS:
        raise ValueError(f"{config}: unknown world model kind {kind!r}; known: {sorted(KINDS)}")
    return KINDS[kind].model.from_pretrained(str(folder))
