"""One way to build a fresh world model from the ``world_model/`` config group, for every entry point."""

from __future__ import annotations

from typing import Any

import torch

from experiments.world_model_source import resolve_lm_pretrained
from world_model import TurnTokenizer, token_limits
from world_model.config import WorldModelOptions
from world_model.kinds import kind_named
from world_model.protocol import WorldModelLike


def build_world_model(
    options: WorldModelOptions, env_name: str, env_kwargs: dict[str, Any], vocabulary: list[str], *, seed: int,
    device: str | torch.device = "cpu",
) -> WorldModelLike:
    """A world model over the env's words (``world_model.name``: a kind of ``world_model.kinds``), with the
    env's word caps unless ``world_model.max_*_words`` set them, initialised from ``seed``, on ``device``
    (a run's: the trainer's) unless ``world_model.lm.device`` pins one. ``world_model.lm.pretrained`` may
    name a GGUF file or a packaged model (``smollm2``): it is read through the de-quantised cache."""
    options = resolve_lm_pretrained(options)
    limits = token_limits(
        env_name, dict(env_kwargs), observation=options.max_observation_words, action=options.max_action_words,
        option_names=("world_model.max_observation_words", "world_model.max_action_words"),
    )
    return kind_named(options.name).build(options, TurnTokenizer.build(vocabulary, limits), seed, device)
